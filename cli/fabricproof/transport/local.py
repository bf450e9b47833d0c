"""Local transport: run the collectors on this node itself (Slurm health check, cron, DaemonSet), no shell."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..model import Command, CommandResult, Host, decoded
from . import lanes
from .base import RunContext, Transport
from .framing import KILL_AFTER_S


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


@dataclass(frozen=True)
class LocalOptions:
    """The environment the commands run in (default: this process's)."""

    env: Mapping[str, str] | None = None


class LocalTransport(Transport):
    """Runs each argv as a child in its own session, so a timeout ends the tool and everything it started."""

    name = "local"

    def __init__(self, options: LocalOptions | None = None, ctx: RunContext | None = None):
        options = options or LocalOptions()
        self.env = dict(options.env) if options.env is not None else None

    def run_many(self, host: Host, commands: Sequence[Command], deadline: float) -> list[CommandResult]:
        """The commands in lanes, as the SSH transport's script runs them: a tool's commands in sequence (skipped
        once one of them timed out), lanes side by side."""
        results: list[CommandResult | None] = [None] * len(commands)

        def lane(indices: Sequence[int]) -> None:
            hung: dict[str, CommandResult] = {}
            for i in indices:
                cmd = commands[i]
                if cmd.tool in hung:
                    first = hung[cmd.tool]
                    results[i] = CommandResult(cmd.argv, "", exit_code=None,
                                               error=lanes.skip_reason(cmd.tool, first.argv, first.error or ""))
                    continue
                results[i] = self._run(cmd, deadline)
                if cmd.tool and (results[i].error or "").startswith("timed out"):
                    hung[cmd.tool] = results[i]

        plan = lanes.plan(commands)
        if len(plan) == 1:
            lane(plan[0])
        else:
            with ThreadPoolExecutor(max_workers=len(plan), thread_name_prefix="lane") as pool:
                list(pool.map(lane, plan))
        return [r for r in results if r is not None]

    def _run(self, cmd: Command, deadline: float) -> CommandResult:
        budget = min(cmd.timeout_s, deadline - time.monotonic())
        if budget <= 0:
            return CommandResult(cmd.argv, "", exit_code=None, error="not run: the host's collection deadline passed")
        started = time.monotonic()
        try:
            proc = subprocess.Popen(cmd.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, env=self.env)
        except FileNotFoundError:
            # What a shell reports for a missing tool, so facts read the same whichever transport ran it.
            return CommandResult(cmd.argv, "", f"{cmd.argv[0]}: command not found\n", exit_code=127)
        except PermissionError:
            return CommandResult(cmd.argv, "", f"{cmd.argv[0]}: permission denied\n", exit_code=126)
        error = None
        try:
            out, err = proc.communicate(timeout=budget)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=KILL_AFTER_S)
            except subprocess.TimeoutExpired:
                _kill_group(proc, signal.SIGKILL)
                out, err = proc.communicate()
            error = (f"timed out after {cmd.timeout_s:g} s" if budget >= cmd.timeout_s
                     else "cut off: the host's collection deadline passed")
        (stdout, stdout_bytes), (stderr, stderr_bytes) = decoded(out), decoded(err)
        return CommandResult(cmd.argv, stdout, stderr, exit_code=None if error else proc.returncode,
                             duration_s=time.monotonic() - started, error=error, stdout_bytes=stdout_bytes,
                             stderr_bytes=stderr_bytes)
