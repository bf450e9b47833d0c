"""One wave of a rollout: pre-gate -> drain -> apply -> post-gate -> soak -> decide -> undrain, the gates being the
plan's kinds of the registry (rollout.gates) at the stages each names; each step recorded before and after it acts,
so a run resumes from the step it was in."""

from __future__ import annotations

from typing import Any

from ..model import ExitCode
from . import decisions
from . import state as st
from .decisions import HALT, PROCEED, ROLLBACK
from .gate import judge
from .gates.base import DRAINED, POST, PRE, SETTLE
from .plan import Wave
from .rollback import RollbackPhase
from .stepid import APPLY, DECIDE, DONE, DRAIN, FAILED_ROLLBACK, PAUSE, PRE_VERDICT, UNDRAIN, StepId
from .steps import RunSteps

#: The decisions that end a wave.
VERDICTS = (PROCEED, HALT, ROLLBACK)


class WaveRunner:
    """Drives one wave from wherever its recorded steps stand; returns an exit code when the run stops there."""

    def __init__(self, steps: RunSteps, rollback: RollbackPhase):
        self.s = steps
        self.rollback = rollback

    def run(self, w: Wave) -> int | None:
        def at(kind: str, batch: int | None = None) -> StepId:
            return StepId(w.index, kind, batch)

        label = f"wave {w.index + 1}/{len(self.s.state.data['waves'])} {w.name}"
        if w.pause and not self.s.state.step_done(at(PAUSE)):
            if self.s.state.step(at(PAUSE)) is None:
                self.s.state.begin(at(PAUSE))
                self.s.log.record("PAUSE", f"the plan pauses before {label}: `rollout resume {self.s.state.run_id}` "
                                  "continues", step=at(PAUSE), wave=w.name, hosts=w.hosts)
            self.s.state.set_status(st.PAUSED)
            self.s.state.save()
            self.s.say(f"paused before {label}; resume with `fabricproof rollout resume {self.s.state.run_id}`")
            return ExitCode.HALTED
        self.s.say(f"{label}: {len(w.hosts)} host(s)")
        self.s.check_stop()

        self._gates(w, PRE)
        self.s.check_stop()
        pre_failed = {h: self.s.state.hosts[h]["reason"] for h in w.hosts if self.s.state.hosts[h]["state"] == st.EXCLUDED}
        if not self.s.state.step_done(at(PRE_VERDICT)):
            verdict = judge(pre_failed, len(w.hosts), w.budget)
            if not verdict.proceed:
                sid = at(PRE_VERDICT)
                self.s.state.begin(sid)
                why = f"pre-gate: {verdict.why}; nothing in this wave was changed"
                self.s.log.record(HALT, why, step=sid, wave=w.name, hosts=pre_failed,
                                  evidence=self._evidence(w, PRE))
                self.s.state.finish(sid, status="failed", why=why)
                return self._halt(w, why)
            self.s.state.begin(at(PRE_VERDICT))
            self.s.state.finish(at(PRE_VERDICT))

        if self.s.plan.drain and self.s.plan.drain.enabled and not self.s.state.step_done(at(DRAIN)):
            self.s.drain(at(DRAIN), w, self.s.state.hosts_in(st.PENDING, wave=w.index))
            self.s.check_stop()

        for _ in self._gates(w, DRAINED):
            self.s.check_stop()

        for j, batch in enumerate(w.batches):
            sid = at(APPLY, j)
            if self.s.state.step_done(sid):
                continue
            hosts = [h for h in batch if self.s.state.hosts[h]["state"] in (st.PENDING, st.APPLYING)]
            self.s.apply_batch(sid, w, hosts, self.s.plan.apply.path, self.s.plan.apply.vars, "apply", self.s.ctx.after)
            self.s.check_stop()

        self._gates(w, POST)
        self.s.check_stop()
        self._gates(w, SETTLE)
        self.s.check_stop()
        return self._decide(w)

    def _gates(self, w: Wave, stage: str) -> list[StepId]:
        """Run the plan's gates of one stage on the wave, each unless its step is done already; the steps run."""
        ran = []
        before = stage in (PRE, DRAINED)
        for kind, spec in self.s.plan.gates.active():
            if (kind.before_stage if before else kind.after_stage) != stage or not kind.applies(spec, w):
                continue
            sid = StepId(w.index, kind.before_step if before else kind.after_step)
            if self.s.state.step_done(sid):
                continue
            (kind.before if before else kind.after)(self.s, w, spec)
            ran.append(sid)
        return ran

    def _own_steps(self, w: Wave, *stages: str) -> list[StepId]:
        """The steps of its own each of the plan's gates takes at these stages, in registry order."""
        out = []
        for kind, _spec in self.s.plan.gates.active():
            if kind.before_stage in stages and kind.before_step:
                out.append(StepId(w.index, kind.before_step))
            if kind.after_stage in stages and kind.after_step:
                out.append(StepId(w.index, kind.after_step))
        return out

    def _evidence(self, w: Wave, *stages: str) -> list[str]:
        return [e for sid in self._own_steps(w, *stages) for e in (self.s.state.step(sid) or {}).get("evidence", [])]

    def _decide(self, w: Wave) -> int | None:
        sid = StepId(w.index, DECIDE)
        failed = {h: d["reason"] for h in w.hosts for d in [self.s.state.hosts[h]]
                  if d["state"] in (st.EXCLUDED, st.APPLY_FAILED, st.FAILED, st.HOST_ROLLED_BACK,
                                    st.HOST_ROLLBACK_FAILED, st.ROLLING_BACK)}
        verdict = judge(failed, len(w.hosts), w.budget)
        evidence = self._evidence(w, POST, SETTLE)
        # Each failed host's action as its gates found it, the latest gate's last (the soak's over the post-gate's).
        actions = {h: a for s in self._own_steps(w, PRE, POST, SETTLE)
                   for h, a in ((self.s.state.step(s) or {}).get("actions") or {}).items() if h in failed}
        policy = self.s.plan.on_failure
        logged = self._logged_decision(sid) if self.s.state.step(sid) is not None else None
        if logged is not None and not self.s.state.step_done(sid):
            # Killed after the decision was logged but before state.json recorded it: keep that decision (the
            # log is the record of what was decided) instead of deciding, and logging, a second time.
            self.s.state.finish(sid, decision=logged["what"], why=logged["why"], failed=failed)
        if not self.s.state.step_done(sid):
            self.s.state.begin(sid, log_records=len(decisions.read(self.s.state.dir)))
            if verdict.proceed:
                decision, why = PROCEED, verdict.why + (" -> next wave" if w.index + 1 < len(self.s.state.data["waves"])
                                                        else " -> rollout complete")
            elif policy == "halt":
                decision, why = HALT, verdict.why + "; policy halt: hosts stay as they are for an operator"
            else:
                decision, why = ROLLBACK, verdict.why + f"; policy {policy}"
            self.s.log.record(decision, why, step=sid, wave=w.name, hosts=failed, evidence=evidence, actions=actions)
            self.s.state.finish(sid, decision=decision, why=why, failed=failed)
            self.s.say(f"  decision: {decision}: {why}")
        decision = self.s.state.step(sid)["decision"]
        if decision == HALT:
            return self._halt(w, self.s.state.step(sid)["why"])
        if decision == ROLLBACK:
            waves = self.s.state.waves[: w.index + 1] if policy == "rollback_all" else [w]
            self.rollback.start(waves, reason=f"{w.name} failed its proof ({policy})", then="stop",
                                limit_hosts=None)
            code = self.rollback.run()
            assert code is not None
            return code
        # PROCEED: roll back what failed within the budget (unless halting is the policy), then undrain the rest.
        changed_failed = [h for h in failed if self.s.state.hosts[h]["state"] in (st.APPLY_FAILED, st.FAILED)]
        if changed_failed and policy != "halt" and not self.s.state.step_done(StepId(w.index, FAILED_ROLLBACK)):
            self.s.state.begin(StepId(w.index, FAILED_ROLLBACK))
            self.rollback.start([w], reason=f"{len(changed_failed)} host(s) of {w.name} failed within the budget",
                                then="continue", limit_hosts=changed_failed, done_step=StepId(w.index, FAILED_ROLLBACK))
            self.rollback.run()
        if self.s.plan.drain and self.s.plan.drain.enabled and not self.s.state.step_done(StepId(w.index, UNDRAIN)):
            self.s.undrain(StepId(w.index, UNDRAIN), w, self.s.state.hosts_in(st.PASSED, wave=w.index))
        self.s.state.begin(StepId(w.index, DONE))
        self.s.state.finish(StepId(w.index, DONE))
        return None

    def _logged_decision(self, sid: StepId) -> dict[str, Any] | None:
        """The verdict the decision log holds for this step since it last began (an earlier, forgotten execution
        of the step may have logged another), if any."""
        since = (self.s.state.step(sid) or {}).get("log_records", 0)
        found = [d for d in decisions.read(self.s.state.dir)[since:]
                 if d.get("step") == str(sid) and d.get("what") in VERDICTS]
        return found[-1] if found else None

    def _halt(self, w: Wave, why: str) -> int:
        self.s.state.set_status(st.HALTED)
        self.s.state.data["halted_wave"] = w.index
        self.s.state.save()
        self.s.say(f"halted at {w.name}: {why}")
        return ExitCode.CHECK_FAILED
