"""More than one client core: hosts sharded across worker processes, each with its own fleet runner (threads,
transport connections), parsing and writing its hosts into the one run store and streaming what it recorded back
to the process that started the run, which keeps the one account (results, sink, run.json).

A worker is `python -m fabricproof.collect.worker FD` (worker.py): its shard arrives pickled on stdin, its records
leave on pipe FD. Not multiprocessing's spawn, which re-imports the caller's main module (a script without a
`__main__` guard would collect its fleet again in every worker), nor fork, which is unsafe in a process that
already runs threads.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import WriteError
from ..model import Command, Host
from ..runstore import RunStore
from ..transport import ErrorKind, HostError, RunContext, fanout
from .record import Finished, not_collected

if TYPE_CHECKING:  # imported by the runs that start workers: a one-host run (check --local) never does
    from multiprocessing.connection import Connection

#: Default worker count at most, whatever the machine has: past this the run store's disk is the limit.
MAX_DEFAULT_WORKERS = 16
#: Hosts a worker must have to be worth its start-up (~0.5 s of CPU to import fabricproof and paramiko).
MIN_HOSTS_PER_WORKER = 50
#: After Ctrl-C, workers get this long (and the kill grace) to cut their running hosts short and report them.
STOP_GRACE_S = fanout.STOP_GRACE_S
WORKER_MODULE = __name__.rpartition(".")[0] + ".worker"
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the directory `import fabricproof` must find


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(requested: int | None, hosts: int, forks: int, shardable: bool) -> int:
    """How many processes collect: what was asked (else the machine's cores, up to MAX_DEFAULT_WORKERS, and only
    as many as have MIN_HOSTS_PER_WORKER hosts each), never more than hosts or forks; 1 for a transport that fans
    out by itself or reaches only this node."""
    if not shardable or hosts < 2:
        return 1
    if requested is None:
        requested = min(machine_cores(), MAX_DEFAULT_WORKERS, hosts // MIN_HOSTS_PER_WORKER)
    return max(1, min(requested, hosts, forks))


def split(items: Sequence[Any], n: int) -> list[list[Any]]:
    """Round-robin shards: hosts of one rack or group are spread over every worker."""
    return [list(items[k::n]) for k in range(n)]


def forks_each(forks: int, workers: int) -> list[int]:
    """--forks stays the hosts collected at once in total: shared out, the first workers taking the remainder."""
    return [max(1, forks // workers + (1 if k < forks % workers else 0)) for k in range(workers)]


@dataclass(frozen=True)
class Shard:
    """What one worker process needs: its hosts, the commands, and how to reach and record them (picklable)."""

    index: int
    hosts: tuple[Host, ...]
    commands: tuple[Command, ...]
    collector_ids: tuple[str, ...]
    via: str
    options: Any
    ctx: RunContext


# ---------------------------------------------------------------------------------------- in the parent


@dataclass
class _Worker:
    shard: Shard
    process: subprocess.Popen[bytes]
    conn: Connection
    ended: bool = False  # sent its "end"
    gone: bool = False  # its pipe closed


def _start(shard: Shard) -> _Worker:
    import pickle
    from multiprocessing.connection import Connection

    read_fd, write_fd = os.pipe()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_PARENT), env.get("PYTHONPATH", "")) if p)
    try:
        # A process group of its own: Ctrl-C at the terminal reaches the parent only, which stops workers in order.
        process = subprocess.Popen([sys.executable, "-m", WORKER_MODULE, str(write_fd)], stdin=subprocess.PIPE,
                                   pass_fds=(write_fd,), env=env, process_group=0)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    assert process.stdin is not None
    try:
        process.stdin.write(pickle.dumps(shard))
        process.stdin.close()
    except BrokenPipeError:  # it died at once; its pipe says so below
        pass
    return _Worker(shard, process, Connection(read_fd, writable=False))


def _died(process: subprocess.Popen[bytes]) -> str:
    code = process.poll()
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _Held:
    """SIGINT held back while a record is taken: Ctrl-C (KeyboardInterrupt, raised in this main thread) landing
    between a worker's record leaving the pipe and the run accepting it would lose a host whose facts are already
    on disk (run.json would call it pending). Outside `taking()` the signal acts at once, as before; inside, it acts
    as the record is in. Worker processes are safe without it: their hosts report from fan-out threads."""

    def __init__(self) -> None:
        self.holding = False
        self.pending: tuple[int, Any] | None = None
        self.previous: Any = None

    def __enter__(self) -> _Held:
        import threading

        # Python runs signal handlers in the main thread only, and only there may they be changed.
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.holding:
            self.pending = (signum, frame)
        else:
            self._deliver(signum, frame)

    def _deliver(self, signum: int, frame: Any) -> None:
        if callable(self.previous):
            self.previous(signum, frame)  # Python's default raises KeyboardInterrupt; a rollout's records a stop
        elif self.previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def taking(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.pending is not None:
            signum, frame = self.pending
            self.pending = None
            self._deliver(signum, frame)


def run_sharded(hosts: Sequence[Host], commands: Sequence[Command], collector_ids: Sequence[str], via: str,
                options: Any, ctx: RunContext, workers: int, accept: Callable[[Finished], None],
                recorded: Callable[[str], bool]) -> None:
    """Collect `hosts` in `workers` processes, `ctx.forks` hosts at once in total; `accept` takes each host's record
    as it arrives. A worker that dies leaves its unfinished hosts recorded as not collected (or as collected, when
    their facts reached the run store before it died). Ctrl-C, or a worker whose writes the disk refused (WriteError),
    stops every worker, takes what they report while they stop, and re-raises."""
    forks = forks_each(ctx.forks, workers)
    pool: list[_Worker] = []
    with _Held() as held:
        try:
            for k, part in enumerate(split(list(hosts), workers)):
                pool.append(_start(Shard(k, tuple(part), tuple(commands), tuple(collector_ids), via, options,
                                         RunContext(ctx.run_dir, ctx.run_id, forks[k], ctx.host_timeout_s))))
            try:
                _drain(pool, held, accept, deadline=None)
            except (KeyboardInterrupt, WriteError):
                for w in pool:
                    if w.process.poll() is None:
                        w.process.send_signal(signal.SIGTERM)
                with contextlib.suppress(WriteError):  # the first failed write is the one reported
                    _drain(pool, held, accept, deadline=time.monotonic() + STOP_GRACE_S + 5)
                raise
            for w in pool:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    w.process.wait(5)
                if not w.ended:
                    _bury(w, accept, recorded, f"the worker process (pid {w.process.pid}) {_died(w.process)}")
        finally:
            for w in pool:
                if w.process.poll() is None:
                    w.process.kill()  # our own child, by its pid
                with contextlib.suppress(subprocess.TimeoutExpired):
                    w.process.wait(5)
                w.conn.close()


def _drain(pool: list[_Worker], held: _Held, accept: Callable[[Finished], None], deadline: float | None) -> None:
    """Take records until every worker's pipe has closed, or the deadline passes."""
    from multiprocessing.connection import wait

    while True:
        live = [w for w in pool if not w.gone]
        if not live:
            return
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        if timeout == 0:
            return
        ready = wait([w.conn for w in live], timeout)
        for w in live:
            if w.conn not in ready:
                continue
            with held.taking():  # a record read is a record accepted
                try:
                    message = w.conn.recv()
                except Exception:  # EOF, or a message cut off by the worker's death
                    w.gone = True
                    continue
                if isinstance(message, Finished):
                    accept(message)
                    continue
            if isinstance(message, tuple) and message and message[0] == "end":
                w.ended = True
            elif isinstance(message, tuple) and message and message[0] == "write-error":
                raise WriteError(*message[1:])  # the run stops: run_sharded ends every worker


def _bury(w: _Worker, accept: Callable[[Finished], None], recorded: Callable[[str], bool], why: str) -> None:
    """The hosts of a dead worker that it never reported: collected if their facts made it to the run store (facts
    are renamed into place whole), otherwise not collected, saying why."""
    store = RunStore(w.shard.ctx.run_dir)
    for host in w.shard.hosts:
        if recorded(host.name):
            continue
        doc = None
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(store.facts_path(host.name).read_text(encoding="utf-8"))
        if isinstance(doc, dict):
            failed = {cid: str(run.get("error", "failed")) for cid, run in (doc.get("collectors") or {}).items()
                      if isinstance(run, dict) and run.get("status") == "error"}
            accept(Finished(host.name, doc=doc, failed=failed, worker=w.process.pid))
        else:
            accept(not_collected(host.name, HostError(ErrorKind.FAILED, f"{host.name}: not collected: {why}"),
                                 w.process.pid))


