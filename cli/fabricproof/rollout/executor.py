"""The rollout executor: drives a run from where its state stands (waves, then or in between a rollback phase) to a
stopping point, and turns SIGTERM/SIGINT/SIGHUP or an abort request into a stop at the next step boundary. Every step
is recorded in state.json before and after it acts, and every decision in decisions.jsonl (see steps, waves,
rollback), so a run killed at any point resumes without applying any host twice."""

from __future__ import annotations

import contextlib
import shutil
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import ExitCode
from . import state as st
from .decisions import DecisionLog
from .plan import Plan
from .rollback import RollbackPhase
from .stepid import DONE, StepId
from .steps import Context, RunPlaybook, RunSteps, Stopped
from .store import ABORT_FILE, RolloutStore
from .waves import WaveRunner

__all__ = ["ABORT_FILE", "STOP_SIGNALS", "Context", "Executor", "RunPlaybook", "snapshot_inputs", "start_rollback"]

#: Signals that stop a run at the next step boundary, recorded as INTERRUPTED. SIGHUP is the one a closed terminal
#: or a dropped SSH session to the control machine sends: it must not kill a run mid-apply without a record.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Executor:
    """One run's driver: the wave runner and the rollback phase over the shared step actions."""

    def __init__(self, ctx: Context, state: st.RunState, log: DecisionLog):
        self.steps = RunSteps(ctx, state, log)
        self.rollback = RollbackPhase(self.steps)
        self.waves = WaveRunner(self.steps, self.rollback)
        self.state = state
        self.log = log

    def run(self) -> int:
        """Drive the run from where its state stands to a stopping point; returns the exit code."""
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():  # Python delivers signals to the main thread only
            previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            self.state.set_status(st.RUNNING)  # exit code 130 on disk until a verdict: dying now is an interruption
            self.state.save()
            return self._drive()
        except Stopped:
            return self._stopped()
        except Exception as exc:
            # Whatever stopped the run is in its log, so no RESUME record is left without an outcome. When the
            # error is the disk itself (a record or the state could not be written) these writes may fail too:
            # the error that stopped the run is the one reported, and state.json on disk still reads as running,
            # which resume treats as a run whose process died.
            with contextlib.suppress(OSError):
                self.log.record("ERROR", f"the run stopped on an error: {type(exc).__name__}: {exc}; "
                                         f"`rollout resume {self.state.run_id}` retries from this step")
            self.state.set_status(st.INTERRUPTED)
            with contextlib.suppress(OSError):
                self.state.save()
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.steps.signal = signum
        self.steps.say(f"received {signal.Signals(signum).name}: stopping after the current step "
                       "(a running playbook finishes its batch)")
        signal.signal(signum, signal.SIG_DFL)  # a second signal acts at once

    def _drive(self) -> int:
        if self.state.data["phase"] == "rollback":
            code = self.rollback.run()
            if code is not None:
                return code
        for w in self.state.waves:
            if self.state.step_done(StepId(w.index, DONE)):
                continue
            code = self.waves.run(w)
            if code is not None:
                return code
        changed = self.state.hosts_in(st.PASSED)
        failed = self.state.hosts_in(st.FAILED, st.APPLY_FAILED, st.EXCLUDED, st.HOST_ROLLED_BACK,
                                     st.HOST_ROLLBACK_FAILED)
        why = f"every wave done: {len(changed)} host(s) changed and proven on the after-baseline"
        if failed:
            why += f"; {len(failed)} host(s) left out within the failure budget"
        stuck = self.state.hosts_in(st.HOST_ROLLBACK_FAILED)
        if stuck:
            why += f"; {len(stuck)} of them failed their rollback and stay drained for an operator"
        self.log.record("DONE", why, hosts=failed)
        self.state.set_status(st.ROLLBACK_FAILED if stuck else st.DONE)
        self.state.save()
        self.steps.say(why)
        return ExitCode.HALTED if stuck else ExitCode.OK

    def _stopped(self) -> int:
        if self.steps.store.abort_path.exists():
            self.state.set_status(st.ABORTED)
            self.state.save()
            self.steps.say("aborted: hosts stay as they are (drained hosts stay drained); see `rollout status`")
            return ExitCode.HALTED
        name = signal.Signals(self.steps.signal).name if self.steps.signal else "a signal"
        self.log.record("INTERRUPTED", f"{name} received; `rollout resume {self.state.run_id}` continues from here")
        self.state.set_status(st.INTERRUPTED)
        self.state.save()
        return ExitCode.INTERRUPTED


def start_rollback(executor: Executor, hosts: Sequence[str] | None, reason: str) -> None:
    """For `fabricproof rollback RUN`: every wave, newest first, limited to hosts (None: all changed hosts)."""
    executor.rollback.start(executor.state.waves, reason=reason, then="stop", limit_hosts=hosts)


def snapshot_inputs(run_dir: Path, plan: Plan) -> dict[str, str]:
    """Copy the plan and its baselines into the run directory: the evidence says what the run was judged against."""
    run = RolloutStore(run_dir)
    copies = {"plan": plan.source, "before": plan.before, "after": plan.after}
    out = {}
    for name, src in copies.items():
        dst = run.input_path(name, Path(src).suffix)
        shutil.copyfile(src, dst)
        dst.chmod(0o600)
        out[name] = str(dst)
    return out
