"""Fan-out for transports that reach one host at a time: a bounded thread pool, one deadline per host."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence

from ..model import Command, Host
from .base import ErrorKind, HostError, OnHost, Outcome, RunContext, Transport


def guarded(transport: Transport, host: Host, commands: Sequence[Command], deadline: float) -> Outcome:
    """One host's outcome; a transport bug on one host must not sink the fleet, so it becomes that host's error."""
    try:
        return transport.run_many(host, commands, deadline)
    except HostError as exc:
        return exc
    except Exception as exc:
        return HostError(ErrorKind.FAILED, f"{host.name}: {type(exc).__name__}: {exc}")


#: How often the waiting main thread looks up for Ctrl-C.
SIGNAL_POLL_S = 0.5
#: After Ctrl-C, hosts already running get this long to be cut short and report.
STOP_GRACE_S = 15.0


class PerHostFleet:
    """Up to `forks` hosts at once, each bounded by the run's host timeout from the moment it starts."""

    def __init__(self, transport: Transport, ctx: RunContext):
        self.transport = transport
        self.forks = ctx.forks
        self.host_timeout_s = ctx.host_timeout_s

    def run(self, hosts: Sequence[Host], commands: Sequence[Command], on_host: OnHost) -> None:
        """Collect every host, `forks` at a time, calling on_host as each finishes. On Ctrl-C, hosts not started
        are dropped and closing the transport cuts the running ones short; they still report (within
        STOP_GRACE_S) before the interrupt leaves run(), so the run's record counts them done."""
        todo: queue.SimpleQueue[Host] = queue.SimpleQueue()
        for host in hosts:
            todo.put(host)
        stop = threading.Event()
        failures: list[BaseException] = []

        def work(finished: threading.Event) -> None:
            try:
                while not stop.is_set():
                    try:
                        host = todo.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        on_host(host.name, guarded(self.transport, host, commands,
                                                   time.monotonic() + self.host_timeout_s))
                    except BaseException as exc:  # a failing sink stops the run, and run() raises it
                        failures.append(exc)
                        stop.set()
            finally:
                finished.set()

        # Own threads rather than a pool: every thread exists before any starts, so after a Ctrl-C that lands
        # mid-start each one that did start is still waited for. Waits are on events, not Thread.join: an
        # interrupted join marks a running thread stopped (CPython 3.11), and later joins would not wait for it.
        n = max(1, min(self.forks, len(hosts)))
        finished = [threading.Event() for _ in range(n)]
        threads = [threading.Thread(target=work, args=(f,), name=f"collect-{i}", daemon=True)
                   for i, f in enumerate(finished)]
        try:
            for t in threads:
                t.start()
            for f in finished:
                # Bounded waits: a signal the kernel hands to a worker thread (or interrupt_main) does not wake a
                # blocked wait, so the main thread looks up twice a second.
                while not f.wait(SIGNAL_POLL_S):
                    pass
        except BaseException:
            stop.set()
            self.interrupt()
            until = time.monotonic() + STOP_GRACE_S
            for t, f in zip(threads, finished):
                if t.ident is not None:  # not yet started: it sees `stop` before it takes a host
                    f.wait(max(0.0, until - time.monotonic()))
            raise
        if failures:
            raise failures[0]

    def interrupt(self) -> None:
        self.transport.close()
