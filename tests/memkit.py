"""Peak memory of a fabricproof CLI run in a process of its own (VmHWM read as it runs), for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def hwm(pid: int) -> int:
    """The process's own peak RSS so far (VmHWM, bytes); 0 once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class TooLong(Exception):
    """The run did not end within its limit (it was killed)."""


def run_measured(argv: list[str], out: Path, limit_s: float = 900.0) -> tuple[int, int]:
    """Run the CLI in a process of its own; (exit code, its peak RSS in bytes). Its output goes to `out`.

    The peak is the child's VmHWM, read as it runs, not wait4's ru_maxrss: Linux carries the high-water mark of the
    memory a process had before exec into ru_maxrss, so a child forked from a pytest worker that has grown to 650 MiB
    over a long suite reported 650 MiB whatever it used itself (alone the same collection measured ~300 MiB)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "cli")}
    with open(out, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "fabricproof", *argv], env=env, cwd=REPO, stdout=sink,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + limit_s
    peak = 0
    while True:
        peak = max(peak, hwm(proc.pid))  # a high-water mark: a read at any moment holds every peak before it
        pid, status, _usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
            return proc.returncode, peak
        if time.monotonic() > deadline:
            os.kill(proc.pid, signal.SIGKILL)  # our own child, by its pid
            os.wait4(proc.pid, 0)
            raise TooLong(f"{argv[0]} did not end within {limit_s:g} s: {out.read_text()[-2000:]}")
        time.sleep(0.05)
