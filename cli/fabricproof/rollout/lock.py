"""Host locks: keep two runs off the same hosts, whatever runs directory each was started from. One lock file
per host in a machine-wide directory (paths.state_dir()/locks), held with flock.

The kernel releases a flock when its holder dies, so holding it means "a process is working on this host
right now". The file also keeps its owner's record (run id, run directory, pid, who, since) after the
process ends: a run that stopped unfinished (halted, paused, interrupted, rollback failed) still reserves
its hosts until it is resumed, rolled back or aborted, because they may be drained or half-changed. A
record whose run finished, or whose run directory is gone, is stale and taken over (and reported).
A run that finishes clears its records.
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
from ..paths import STATE_DIR_ENV
from ..timeutil import utc_now
from .decisions import who

LOCK_DIR = "locks"
RUN_LOCK = ".lock"


class LockBusy(InputError):
    """Another run holds or reserves some of the hosts (exit 2: nothing was touched)."""


def _lock_path(lock_base: Path, host: str) -> Path:
    return Path(lock_base) / LOCK_DIR / (quote(host, safe="") + ".lock")


def _owner_record(run_id: str, host: str | None = None, run_dir: Path | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"run_id": run_id, "pid": os.getpid(), "owner": who(), "since": utc_now()}
    if host:
        rec["host"] = host
    if run_dir is not None:
        rec["run_dir"] = str(Path(run_dir).resolve())
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
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except PermissionError as exc:
        raise InputError(Problem(f"cannot create the lock file ({exc.strerror}): run as the user that owns "
                                 f"{path.parent}, or point {STATE_DIR_ENV} at a directory every operator of "
                                 "this fleet shares", str(path))) from None
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
    where: dict[str, str] = field(default_factory=dict)  # unfinished run id -> its run directory (for messages)

    def release(self, finished: bool = False) -> None:
        """Drop the flocks; a run that `finished` also drops its reservation records (an unfinished one keeps
        them, so its hosts stay reserved)."""
        for fd in self.fds.values():
            try:
                if finished:
                    _write_owner(fd, {})
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


def _unfinished(owner: dict[str, Any]) -> str | None:
    """The status of the run an owner record names, when that run stopped unfinished; None when it finished or
    is gone (a stale record)."""
    from .state import FINISHED, RunState  # state imports nothing of locks; imported here to keep it so

    run_dir = owner.get("run_dir")
    if not run_dir:
        return None
    try:
        status = RunState.load(Path(run_dir)).status
    except InputError:
        return None
    return None if status in FINISHED else status


def acquire(lock_base: Path, run_id: str, hosts: Sequence[str],
            reservations: Iterable[tuple[str, str, Iterable[str]]] = (), run_dir: Path | None = None) -> HostLocks:
    """Lock every host or none, in lock_base/locks (paths.state_dir() for rollouts: one per machine).
    A host is refused when another process holds it, or when the record it left names a run that stopped
    unfinished; `reservations` adds (run id, status, hosts) of such runs known otherwise. `run_dir` is recorded,
    so other runs can tell whether this one finished. Raises LockBusy naming each holder."""
    locks = HostLocks(run_id)
    busy: list[Problem] = []
    held: dict[str, tuple[str, list[str]]] = {}  # unfinished run id -> (status, hosts it still holds)
    for host in sorted(set(hosts)):  # one global order: two runs never wait on each other in a cycle
        fd, owner = _try_flock(_lock_path(lock_base, host))
        if fd is None:
            if owner.get("run_id") != run_id:
                busy.append(Problem(f"host {host} is locked by {_describe(owner)}", _where(owner, lock_base)))
                continue
            busy.append(Problem(f"run {run_id} is already running (pid {owner.get('pid', '?')})",
                                _where(owner, lock_base)))
            break
        locks.fds[host] = fd
        other = owner.get("run_id")
        if other in (None, run_id):
            continue
        status = _unfinished(owner)
        if status is None:
            locks.stale.append(owner)
        else:
            held.setdefault(other, (status, []))[1].append(host)
            locks.where[other] = owner.get("run_dir", "")
    for other, status, other_hosts in reservations:
        if other != run_id:
            overlap = sorted(set(hosts).intersection(other_hosts))
            if overlap:
                held.setdefault(other, (status, []))[1].extend(h for h in overlap if h not in held[other][1])
    for other, (status, taken) in sorted(held.items()):
        shown = ", ".join(sorted(taken)[:5]) + (f" (+{len(taken) - 5})" if len(taken) > 5 else "")
        busy.append(Problem(f"run {other} stopped unfinished ({status}) and still holds {shown}: "
                            f"resume it, roll it back or abort it first", locks.where.get(other) or str(lock_base)))
    if busy:
        locks.release()
        raise LockBusy(busy)
    for host, fd in locks.fds.items():
        _write_owner(fd, _owner_record(run_id, host, run_dir))
    return locks


def _where(owner: dict[str, Any], lock_base: Path) -> str:
    """The holder's run directory for messages, else the lock directory."""
    return str(owner.get("run_dir") or Path(lock_base) / LOCK_DIR)


def clear(lock_base: Path, run_id: str, hosts: Iterable[str]) -> None:
    """Drop the records `run_id` left on these hosts (it was aborted while no process drove it)."""
    for host in hosts:
        path = _lock_path(lock_base, host)
        if not path.exists():
            continue
        fd, owner = _try_flock(path)
        if fd is None:
            continue
        try:
            if owner.get("run_id") == run_id:
                _write_owner(fd, {})
        finally:
            os.close(fd)


def _live_owner(path: Path) -> dict[str, Any] | None:
    """Owner record of a lock file some live process holds, or None when nobody holds it."""
    if not path.exists():
        return None
    fd, owner = _try_flock(path)
    if fd is not None:
        os.close(fd)
        return None
    return owner or {}


def holder(lock_base: Path, host: str) -> dict[str, Any] | None:
    """Owner record of a live lock on host, or None when nobody holds it."""
    return _live_owner(_lock_path(lock_base, host))


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
