"""Host locks: keep two runs off the same hosts. One lock file per host under <runs dir>/locks, held with flock.

The kernel releases a flock when its holder dies, so a lock file nobody holds is stale by
construction (its owner record names the run that died, which we report). Holding the flock is
"a process is working on this host right now"; on top of that, a run that stopped unfinished
(halted, paused, interrupted, rollback failed) still reserves its hosts until it is resumed,
rolled back or aborted: its hosts may be drained or half-changed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from ..errors import InputError, Problem
from ..timeutil import utc_now
from .decisions import who

LOCK_DIR = "locks"
RUN_LOCK = ".lock"


class LockBusy(InputError):
    """Another run holds or reserves some of the hosts (exit 2: nothing was touched)."""


def _lock_path(runs_dir: Path, host: str) -> Path:
    return Path(runs_dir) / LOCK_DIR / (quote(host, safe="") + ".lock")


def _owner_record(run_id: str, host: str | None = None) -> dict[str, Any]:
    rec = {"run_id": run_id, "pid": os.getpid(), "owner": who(), "since": utc_now()}
    if host:
        rec["host"] = host
    return rec


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 4096)
        return json.loads(raw.decode() or "{}")
    except (OSError, ValueError):
        return {}


def _write_owner(fd: int, rec: dict[str, Any]) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(rec) + "\n").encode())
    os.fsync(fd)


def _try_flock(path: Path) -> tuple[int | None, dict[str, Any]]:
    """(fd holding an exclusive flock, previous owner record) or (None, current owner record)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        owner = _read_owner(fd)
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None, owner
        raise
    return fd, _read_owner(fd)


@dataclass
class HostLocks:
    """Flocks this process holds; release() (or process exit) frees them."""

    run_id: str
    fds: dict[str, int] = field(default_factory=dict)
    stale: list[dict[str, Any]] = field(default_factory=list)  # owner records of dead holders we took over

    def release(self) -> None:
        for fd in self.fds.values():
            try:
                os.close(fd)  # closing the only fd drops the flock
            except OSError:
                pass
        self.fds.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _describe(owner: dict[str, Any]) -> str:
    if not owner:
        return "another process"
    return f"run {owner.get('run_id', '?')} (pid {owner.get('pid', '?')}, {owner.get('owner', '?')}, since {owner.get('since', '?')})"


def acquire(runs_dir: Path, run_id: str, hosts: Sequence[str],
            reservations: Iterable[tuple[str, str, Iterable[str]]] = ()) -> HostLocks:
    """Lock every host or none. `reservations` are (run id, status, hosts) of unfinished runs other than
    this one; a host they hold is refused like a locked one. Raises LockBusy naming each holder."""
    locks = HostLocks(run_id)
    busy: list[Problem] = []
    for host in sorted(set(hosts)):  # one global order: two runs never wait on each other in a cycle
        fd, owner = _try_flock(_lock_path(runs_dir, host))
        if fd is None:
            if owner.get("run_id") != run_id:
                busy.append(Problem(f"host {host} is locked by {_describe(owner)}", str(runs_dir)))
                continue
            busy.append(Problem(f"run {run_id} is already running (pid {owner.get('pid', '?')})", str(runs_dir)))
            break
        if owner and owner.get("run_id") not in (None, run_id):
            locks.stale.append(owner)
        locks.fds[host] = fd
    wanted = set(hosts)
    for other, status, other_hosts in reservations:
        if other == run_id:
            continue
        overlap = sorted(wanted.intersection(other_hosts))
        if overlap:
            shown = ", ".join(overlap[:5]) + (f" (+{len(overlap) - 5})" if len(overlap) > 5 else "")
            busy.append(Problem(f"run {other} stopped unfinished ({status}) and still holds {shown}: "
                                f"resume it, roll it back or abort it first", str(runs_dir)))
    if busy:
        locks.release()
        raise LockBusy(busy)
    for host, fd in locks.fds.items():
        _write_owner(fd, _owner_record(run_id, host))
    return locks


def _live_owner(path: Path) -> dict[str, Any] | None:
    """Owner record of a lock file some live process holds, or None when nobody holds it."""
    if not path.exists():
        return None
    fd, owner = _try_flock(path)
    if fd is not None:
        os.close(fd)
        return None
    return owner or {}


def holder(runs_dir: Path, host: str) -> dict[str, Any] | None:
    """Owner record of a live lock on host, or None when nobody holds it."""
    return _live_owner(_lock_path(runs_dir, host))


# ------------------------------------------------------------------------------------- run lock


@contextmanager
def run_lock(run_dir: Path, run_id: str) -> Iterator[int]:
    """The run's own lock: held by the one process driving the run, so `abort` can find and signal it."""
    fd, owner = _try_flock(Path(run_dir) / RUN_LOCK)
    if fd is None:
        raise LockBusy(Problem(f"run {run_id} is being driven by pid {owner.get('pid', '?')} "
                               f"({owner.get('owner', '?')})", str(run_dir)))
    try:
        _write_owner(fd, _owner_record(run_id))
        yield fd
    finally:
        os.close(fd)


def run_holder(run_dir: Path) -> dict[str, Any] | None:
    """Owner record of the live process driving a run, or None."""
    return _live_owner(Path(run_dir) / RUN_LOCK)
