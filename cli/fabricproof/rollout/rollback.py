"""The rollback phase of a rollout: put back the changed hosts of some waves, newest wave first, and prove the
before-baseline on them. Its plan is recorded before anything is touched, so a killed rollback resumes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import ExitCode
from ..timeutil import utc_now
from . import state as st
from .gate import summarize
from .gates.checks import GATE as CHECKS
from .gates.checks import ROLLBACK_GATE
from .plan import Wave
from .stepid import APPLY, DRAIN, UNDRAIN, StepId
from .steps import RunSteps


class RollbackPhase:
    """Starts (records) and runs a rollback of a run; `then` says whether the rollout goes on afterwards."""

    def __init__(self, steps: RunSteps):
        self.s = steps

    def start(self, waves: Sequence[Wave], *, reason: str, then: str,
              limit_hosts: Sequence[str] | None, done_step: StepId | None = None) -> None:
        """Record which hosts of which waves are put back (reverse wave order) before anything is touched."""
        prev = self.s.state.data.get("rollback") or {}
        rb_id = int(prev.get("id", 0)) + 1
        plan: list[dict[str, Any]] = []
        for w in sorted(waves, key=lambda x: -x.index):
            hosts = [h for h in w.hosts if self.s.state.hosts[h]["state"] in st.CHANGED
                     and (limit_hosts is None or h in limit_hosts)]
            if hosts:
                plan.append({"wave": w.index, "hosts": hosts})
        self.s.state.data["rollback"] = {"id": rb_id, "reason": reason, "then": then, "waves": plan,
                                         "started_at": utc_now(), "done_step": done_step and str(done_step)}
        self.s.state.data["phase"] = "rollback"
        self.s.state.save()
        self.s.log.record("ROLLBACK_START", f"{reason}: putting back {sum(len(x['hosts']) for x in plan)} host(s) in "
                          f"reverse wave order, then proving the before-baseline",
                          step=StepId.phase(rb_id), hosts=[h for x in plan for h in x["hosts"]])

    def run(self) -> int | None:
        """Run (or resume) the recorded rollback. Returns an exit code when the run stops here, None to go on."""
        rb = self.s.state.data["rollback"]
        n = rb["id"]
        waves = {w.index: w for w in self.s.state.waves}
        for item in rb["waves"]:
            w = waves[item["wave"]]
            hosts = item["hosts"]

            def at(kind: str, batch: int | None = None, w: Wave = w) -> StepId:
                return StepId(w.index, kind, batch, rollback=n)

            self.s.check_stop()
            if self.s.plan.drain and self.s.plan.drain.enabled and not self.s.state.step_done(at(DRAIN)):
                self.s.drain(at(DRAIN), w, hosts)
            for j, chunk in enumerate(_chunks(hosts, _batch_size(w))):
                sid = at(APPLY, j)
                if not self.s.state.step_done(sid):
                    todo = [h for h in chunk if self.s.state.hosts[h]["state"] != st.HOST_ROLLED_BACK
                            and (self.s.state.hosts[h].get("rollback") or {}).get("skipped") != n]
                    self.s.apply_batch(sid, w, todo, self.s.plan.rollback.path, self.s.plan.rollback.vars, "rollback",
                                       self.s.ctx.before, rollback_state=(st.ROLLING_BACK, st.ROLLING_BACK,
                                                                          st.HOST_ROLLBACK_FAILED))
                self.s.check_stop()
            if not self.s.state.step_done(at(ROLLBACK_GATE)):
                CHECKS.rollback_gate(self.s, at(ROLLBACK_GATE), w, hosts, n)
            self.s.check_stop()
            if self.s.plan.drain and self.s.plan.drain.enabled and not self.s.state.step_done(at(UNDRAIN)):
                self.s.undrain(at(UNDRAIN), w, self.s.state.hosts_in(st.HOST_ROLLED_BACK, wave=w.index))
        all_hosts = [h for item in rb["waves"] for h in item["hosts"]]
        bad = [h for h in all_hosts if self.s.state.hosts[h]["state"] != st.HOST_ROLLED_BACK]
        proven = [h for h in all_hosts if h not in bad]
        self.s.state.data["phase"] = "rollout"
        rb["ended_at"] = utc_now()
        if rb.get("done_step"):
            self.s.state.finish(rb["done_step"])
        if bad:
            why = (f"{len(bad)} host(s) do not prove the before-baseline after the rollback and stay drained for an "
                   f"operator: {summarize([h + ': ' + self.s.state.hosts[h]['reason'] for h in bad], 2)}")
            self.s.log.record("ROLLBACK_FAILED", why, step=StepId.phase(n), hosts=bad)
            self.s.say(f"rollback incomplete: {why}")
            if rb["then"] == "continue":  # the rollout goes on; the run ends waiting for an operator
                self.s.state.save()
                return None
            self.s.state.set_status(st.ROLLBACK_FAILED)
            self.s.state.save()
            return ExitCode.HALTED
        why = f"{len(proven)} host(s) put back and proven on the before-baseline"
        self.s.log.record("ROLLBACK_DONE", why, step=StepId.phase(n), hosts=proven,
                          evidence=[e for item in rb["waves"] for e in
                                    (self.s.state.step(StepId(item["wave"], ROLLBACK_GATE, rollback=n)) or {})
                                    .get("evidence", [])])
        self.s.say(f"rolled back: {why}")
        if rb["then"] == "continue":
            self.s.state.save()
            return None
        self.s.state.set_status(st.ROLLED_BACK)
        self.s.state.save()
        return ExitCode.ROLLED_BACK


def _batch_size(w: Wave) -> int:
    return max(1, max((len(b) for b in w.batches), default=1))


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i:i + size]) for i in range(0, len(items), size)]
