"""Fan-out for transports that reach one host at a time: a bounded thread pool, one deadline per host."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

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


#: After Ctrl-C, hosts already running get this long to be cut short and report.
STOP_GRACE_S = 15.0


class PerHostFleet:
    """Up to `forks` hosts at once, each bounded by the run's host timeout from the moment it starts."""

    def __init__(self, transport: Transport, ctx: RunContext):
        self.transport = transport
        self.forks = ctx.forks
        self.host_timeout_s = ctx.host_timeout_s

    def run(self, hosts: Sequence[Host], commands: Sequence[Command], on_host: OnHost) -> None:
        def one(host: Host) -> None:
            on_host(host.name, guarded(self.transport, host, commands, time.monotonic() + self.host_timeout_s))

        with ThreadPoolExecutor(max_workers=max(1, min(self.forks, len(hosts))), thread_name_prefix="collect") as pool:
            futures = [pool.submit(one, h) for h in hosts]
            try:
                for f in futures:
                    f.result()
            except BaseException:
                # Ctrl-C: hosts not started are dropped, and closing the transport cuts the running ones
                # short instead of letting them run to their deadlines; they report before the run's record
                # is written, so run.json counts them done.
                pool.shutdown(wait=False, cancel_futures=True)
                self.interrupt()
                wait(futures, timeout=STOP_GRACE_S)
                raise

    def interrupt(self) -> None:
        self.transport.close()
