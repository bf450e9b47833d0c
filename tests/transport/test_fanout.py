"""The per-host fan-out on Ctrl-C: hosts not started are dropped, running ones are cut short and still report before
the interrupt leaves run(), so the run's record counts them done."""

from __future__ import annotations

import _thread
import threading
import time
from pathlib import Path

import pytest

from fabricproof.model import Command, CommandResult, Host
from fabricproof.transport.base import RunContext, Transport
from fabricproof.transport.fanout import PerHostFleet


class CutShortOnClose(Transport):
    """A transport whose hosts run until close() (Ctrl-C) cuts them short, as the SSH transport's do."""

    name = "test"

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.running = threading.Semaphore(0)

    def run_many(self, host: Host, commands, deadline: float) -> list[CommandResult]:
        self.running.release()
        self.closed.wait(30)
        time.sleep(0.3)  # noticing the close and decoding what arrived takes a moment
        return [CommandResult(c.argv, "", exit_code=None, error="the collection was interrupted") for c in commands]

    def close(self) -> None:
        self.closed.set()


def test_ctrl_c_lets_running_hosts_report_before_it_propagates(tmp_path: Path) -> None:
    transport = CutShortOnClose()
    fleet = PerHostFleet(transport, RunContext(tmp_path, "r", forks=2, host_timeout_s=60))
    reported: list[str] = []

    def interrupt_once_two_run() -> None:
        transport.running.acquire()
        transport.running.acquire()
        _thread.interrupt_main()  # Ctrl-C

    threading.Thread(target=interrupt_once_two_run, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        fleet.run([Host(f"h{i}") for i in range(5)], [Command(("x",), 5, "x")], lambda name, _o: reported.append(name))
    assert sorted(reported) == ["h0", "h1"]  # the two running hosts, before run() gave up; the other three never ran
