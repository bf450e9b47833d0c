"""A worker process of a sharded collection (shards.py): `python -m fabricproof.collect.worker FD` collects the
shard pickled on its stdin with its own fleet runner and sends each host's record on pipe FD as it finishes."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import pickle
import signal
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from .. import transport
from ..collectors import COLLECTORS
from ..errors import WriteError
from ..runstore import RunStore
from .record import HostWriter
from .shards import Shard

_PR_SET_PDEATHSIG = 1
_M_ARENA_MAX = -8  # mallopt's parameter (glibc malloc.h)
#: malloc arenas a worker's threads share. glibc gives each thread that meets a locked arena one of its own, up to
#: 8 a core; a replay worker's 32 threads each held a host's outputs (~330 KB) in theirs, and the arenas' free,
#: fragmented space grew with the hosts: a worker's peak RSS 57 -> 70 MB from 500 to 5,000 hosts, 45 -> 53 with two.
#: Threads run Python one at a time (the GIL), so they seldom wait on a shared arena.
MALLOC_ARENAS = 2


def _libc() -> Any:
    """This process's C library (prctl, mallopt): both settings are made before the worker does anything else."""
    return ctypes.CDLL(None, use_errno=True)


def _stop_on_sigterm() -> None:
    def stop(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with contextlib.suppress(OSError, AttributeError):
        # The parent gone (killed): end too, instead of collecting for nobody.
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _few_arenas() -> None:
    # Before any thread starts: arenas are handed out as threads first allocate. A libc without mallopt keeps its own.
    with contextlib.suppress(OSError, AttributeError):
        _libc().mallopt(_M_ARENA_MAX, MALLOC_ARENAS)


def worker_main(conn: Connection, shard: Shard) -> None:
    """Collect one shard with its own fleet runner; send each host's record as it finishes, then ("end", stopped)."""
    send_lock = threading.Lock()
    interrupted = False
    try:
        collectors = [COLLECTORS[c] for c in shard.collector_ids]
        writer = HostWriter(RunStore(shard.ctx.run_dir), shard.hosts, collectors, shard.via, worker=os.getpid())
        link, fleet = transport.open_fleet(shard.via, shard.options, shard.ctx)

        def on_host(name: str, outcome: Any) -> None:
            finished = writer.write(name, outcome)
            with send_lock:
                conn.send(finished)

        try:
            fleet.run(list(shard.hosts), list(shard.commands), on_host)
        except KeyboardInterrupt:
            interrupted = True
        except WriteError as exc:
            # The run store's disk failed: the parent, which keeps the one account of the run, stops it and says so.
            with send_lock:
                conn.send(("write-error", exc.path, exc.reason, exc.errno))
        finally:
            link.close()
        # Hosts cut short by the interrupt have reported by now: fleet.run waits for them before it raises.
        with send_lock:
            conn.send(("end", interrupted))
    except (BrokenPipeError, EOFError):  # the parent is gone
        pass
    finally:
        conn.close()


def main(argv: Sequence[str]) -> int:
    _stop_on_sigterm()
    _few_arenas()
    shard = pickle.load(sys.stdin.buffer)
    sys.stdin.close()
    # Everything imported so far lives as long as the process: out of the cyclic collector's way, its full
    # collections walk only what the hosts make (this process is the worker's own, nothing else shares it).
    gc.freeze()
    worker_main(Connection(int(argv[0]), readable=False), shard)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
