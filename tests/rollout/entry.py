"""The fabricproof CLI for rollout tests run in a subprocess (so they can be killed), with one test-only hook:
FABRICPROOF_TEST_KILL_AFTER=WHAT[:N] makes the process SIGKILL itself right after the N-th (default first)
decision record WHAT is durable in decisions.jsonl, before state.json records the step as finished: the
harshest moment to die at a step boundary, reproduced exactly instead of raced for. FABRICPROOF_TEST_STOP_AFTER=WHAT
makes it SIGSTOP itself there instead, so a test can signal it at that very step and then SIGCONT it."""

from __future__ import annotations

import os
import signal
import sys


def _arm_kill(spec: str, signum: int = signal.SIGKILL) -> None:
    from fabricproof.rollout.decisions import DecisionLog

    what, _, nth = spec.partition(":")
    left = [int(nth or 1)]
    record = DecisionLog.record

    def record_then_die(self, rec_what, *args, **kwargs):
        entry = record(self, rec_what, *args, **kwargs)
        if rec_what == what:
            left[0] -= 1
            if left[0] == 0:
                os.kill(os.getpid(), signum)
        return entry

    DecisionLog.record = record_then_die


def app():
    from fabricproof.cli import app as root

    return root


if __name__ == "__main__":
    if os.environ.get("FABRICPROOF_TEST_KILL_AFTER"):
        _arm_kill(os.environ["FABRICPROOF_TEST_KILL_AFTER"])
    if os.environ.get("FABRICPROOF_TEST_STOP_AFTER"):
        _arm_kill(os.environ["FABRICPROOF_TEST_STOP_AFTER"], signal.SIGSTOP)
    sys.argv[0] = "fabricproof"
    app()()
