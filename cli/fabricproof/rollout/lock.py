"""Host locks: keep two runs off the same hosts, whatever runs directory each was started from. One lock file
per host in a machine-wide directory (paths.state_dir()/locks), held with flock.

The kernel releases a flock when its holder dies, so holding it means "a process is working on this host
right now". The file also keeps its owner's record (run id, run directory, pid, who, since) after the
process ends: a run that stopped unfinished (halted, paused, interrupted, rollback failed) still reserves
its hosts until it is resumed, rolled back or aborted, because they may be drained or half-changed. A
record is taken over (and reported) only when its holder is proven gone: its run finished, or its run
directory no longer exists. A run whose state cannot be read, or a lock record that cannot be read, holds
its hosts until an operator releases them deliberately (`rollout unlock`). A run that finishes clears its
records.
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
from urllib.parse import quote, unquote

from ..errors import InputError, Problem
from ..paths import STATE_DIR_ENV
from ..timeutil import utc_now
from .decisions import who
from .store import STATE_FILE, RolloutStore

LOCK_DIR = "locks"


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


#: The owner record of a lock file that holds something other than a record: its holder is unknown, so held.
UNREADABLE = "unreadable"


def _read_owner(fd: int) -> dict[str, Any]:
    """The record in a lock file: {} when free (empty or cleared), {UNREADABLE: why} when it cannot be read."""
    try:
        raw = os.pread(fd, 1 << 16, 0)
        rec = json.loads(raw.decode() or "{}")
    except (OSError, ValueError) as exc:
        return {UNREADABLE: f"{type(exc).__name__}: {str(exc)[:80]}"}
    return rec if isinstance(rec, dict) else {UNREADABLE: f"a JSON {type(rec).__name__}, not a lock record"}


def _write_owner(fd: int, rec: dict[str, Any]) -> None:
    """Overwrite then cut to length: a crash midway leaves an unreadable record (held), never an empty one (free)."""
    data = (json.dumps(rec) + "\n").encode()
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))
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
    if not owner or UNREADABLE in owner:
        return "another process"
    return f"run {owner.get('run_id', '?')} (pid {owner.get('pid', '?')}, {owner.get('owner', '?')}, since {owner.get('since', '?')})"


@dataclass(frozen=True)
class Standing:
    """Where the run a lock record names stands, once no process holds the lock: `held` unless proven gone."""

    held: bool
    status: str | None  # the run's status; None when it cannot be known
    why: str  # for the decision log (taken over) or the refusal (held)


def standing(owner: dict[str, Any]) -> Standing:
    """A record whose holder died: taken over when its run finished or its run directory is gone; held when the run
    stopped unfinished, or when its state cannot be read (it may have stopped with hosts drained or half-changed)."""
    from .state import FINISHED, RunState  # state imports nothing of locks; imported here to keep it so

    if UNREADABLE in owner:
        return Standing(True, None, f"its lock record cannot be read ({owner[UNREADABLE]})")
    run_dir = owner.get("run_dir")
    if not isinstance(run_dir, str | None):
        return Standing(True, None, f"its lock record names no run directory but {run_dir!r}")
    if not run_dir:  # a runbook step holds its hosts only while its process lives; no run stays behind to resume
        return Standing(False, None, f"pid {owner.get('pid', '?')} is gone and its record names no run directory")
    try:
        os.stat(run_dir)
    except (FileNotFoundError, NotADirectoryError):
        return Standing(False, None, f"its run directory {run_dir} is gone")
    except OSError as exc:
        return Standing(True, None, f"its run directory cannot be read ({exc.strerror})")
    try:
        status = RunState.load(Path(run_dir)).status
        finished = status in FINISHED
    except InputError as exc:
        return Standing(True, None, f"its {STATE_FILE} cannot be read ({exc.problems[0].message})")
    except Exception as exc:  # noqa: BLE001 - any state that cannot be understood holds the hosts, never frees them
        return Standing(True, None, f"its {STATE_FILE} cannot be read ({type(exc).__name__}: {exc})")
    if finished:
        return Standing(False, status, f"that run finished ({status})")
    return Standing(True, status, f"stopped unfinished ({status})")


def acquire(lock_base: Path, run_id: str, hosts: Sequence[str],
            reservations: Iterable[tuple[str, str, Iterable[str]]] = (), run_dir: Path | None = None) -> HostLocks:
    """Lock every host or none, in lock_base/locks (paths.state_dir() for rollouts: one per machine).
    A host is refused when another process holds it, or when the record it left names a run not proven gone
    (see standing); `reservations` adds (run id, status, hosts) of unfinished runs known otherwise. `run_dir` is
    recorded, so other runs can tell whether this one finished. Raises LockBusy naming each holder."""
    locks = HostLocks(run_id)
    busy: list[Problem] = []
    held: dict[str, tuple[str, list[str]]] = {}  # unfinished run id -> (status, hosts it still holds)
    unknown: dict[tuple[str, str], tuple[dict[str, Any], Standing, list[str]]] = {}  # holders whose state is unreadable
    for host in sorted(set(hosts)):  # one global order: two runs never wait on each other in a cycle
        path = _lock_path(lock_base, host)
        fd, owner = _try_flock(path)
        if fd is None:
            if owner.get("run_id") != run_id:
                busy.append(Problem(f"host {host} is locked by {_describe(owner)}", _where(owner, lock_base)))
                continue
            busy.append(Problem(f"run {run_id} is already running (pid {owner.get('pid', '?')})",
                                _where(owner, lock_base)))
            break
        locks.fds[host] = fd
        if not owner or (owner.get("run_id") == run_id and UNREADABLE not in owner):
            continue
        where = standing(owner)
        if not where.held:
            locks.stale.append({**owner, "why": where.why})
        elif where.status is None:
            key = (str(owner.get("run_id", "")), str(owner.get("run_dir") or path))
            unknown.setdefault(key, (owner, where, []))[2].append(host)
        else:
            other = str(owner.get("run_id", "?"))
            held.setdefault(other, (where.status, []))[1].append(host)
            locks.where[other] = owner.get("run_dir", "")
    for other, status, other_hosts in reservations:
        if other != run_id:
            overlap = sorted(set(hosts).intersection(other_hosts))
            if overlap:
                held.setdefault(other, (status, []))[1].extend(h for h in overlap if h not in held[other][1])
    for other, (status, taken) in sorted(held.items()):
        busy.append(Problem(f"run {other} stopped unfinished ({status}) and still holds {_hosts(taken)}: "
                            f"resume it, roll it back or abort it first", locks.where.get(other) or str(lock_base)))
    for (other, where), (owner, why, taken) in sorted(unknown.items()):
        busy.append(Problem(_unknown_holder(owner, why, taken), where))
    if busy:
        locks.release()
        raise LockBusy(busy)
    for host, fd in locks.fds.items():
        _write_owner(fd, _owner_record(run_id, host, run_dir))
    return locks


def _hosts(names: Sequence[str]) -> str:
    return ", ".join(sorted(names)[:5]) + (f" (+{len(names) - 5})" if len(names) > 5 else "")


def _unknown_holder(owner: dict[str, Any], where: Standing, taken: Sequence[str]) -> str:
    """The refusal for hosts whose holder cannot be proven gone: who, why, and how to release them on purpose."""
    if UNREADABLE in owner:
        return (f"{_hosts(taken)} held: {where.why}, so its holder is unknown and may have left the hosts drained or "
                f"half-changed; once you know no run needs them, release them deliberately with "
                f"`fabricproof rollout unlock {' '.join('--host ' + h for h in sorted(taken)[:5])} --yes`")
    run = owner.get("run_id", "?")
    return (f"run {run} (pid {owner.get('pid', '?')}, {owner.get('owner', '?')}, since {owner.get('since', '?')}) "
            f"still holds {_hosts(taken)}: {where.why}, so it may have stopped with hosts drained or half-changed; "
            f"repair its state and resume or roll it back, or release its hosts deliberately with "
            f"`fabricproof rollout unlock {run} --yes`")


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


def reserved(lock_base: Path, run: str | None = None, hosts: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """host -> the record its lock keeps, for every lock naming `run` (a run id or its run directory) and for
    `hosts` whatever they hold (an unreadable record too); free locks are left out. Raises LockBusy when a live
    process holds one of them: that run is stopped with `rollout abort`, not unlocked."""
    directory = Path(lock_base) / LOCK_DIR
    run_dir = str(Path(run).resolve()) if run else None
    wanted = set(hosts)
    found: dict[str, dict[str, Any]] = {}
    busy: list[Problem] = []
    for path in sorted(directory.glob("*.lock")) if directory.is_dir() else []:
        host = unquote(path.name[: -len(".lock")])
        fd, owner = _try_flock(path)
        if fd is not None:
            os.close(fd)
        named = bool(run) and (owner.get("run_id") == run or owner.get("run_dir") == run_dir)
        if not owner or not (host in wanted or named):
            continue
        if fd is None:
            busy.append(Problem(f"host {host} is locked by {_describe(owner)}, which is running: stop it with "
                                "`fabricproof rollout abort`, not unlock", _where(owner, lock_base)))
        found[host] = owner
    if busy:
        raise LockBusy(busy)
    return found


def release(lock_base: Path, records: dict[str, dict[str, Any]]) -> list[str]:
    """Clear these hosts' records (from `reserved`), each only if it still is what was shown; the hosts cleared."""
    done = []
    for host, shown in sorted(records.items()):
        fd, owner = _try_flock(_lock_path(lock_base, host))
        if fd is None:
            continue
        try:
            if owner == shown:
                _write_owner(fd, {})
                done.append(host)
        finally:
            os.close(fd)
    return done


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
    fd, owner = _try_flock(RolloutStore(run_dir).lock_path)
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
    return _live_owner(RolloutStore(run_dir).lock_path)
