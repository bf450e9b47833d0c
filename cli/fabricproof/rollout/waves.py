"""One wave of a rollout: pre-gate -> drain -> apply -> post-gate -> soak -> decide -> undrain, each step recorded
before and after it acts, so a run resumes from the step it was in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import ExitCode
from ..probes.figures import by_host_rows, regressions
from . import decisions
from . import state as st
from .decisions import HALT, PROCEED, ROLLBACK
from .gate import judge, summarize
from .plan import Wave
from .rollback import RollbackPhase
from .soak import run_soak
from .steps import RunSteps, Stopped, fresh_dir, listing

#: The decisions that end a wave.
VERDICTS = (PROCEED, HALT, ROLLBACK)


class WaveRunner:
    """Drives one wave from wherever its recorded steps stand; returns an exit code when the run stops there."""

    def __init__(self, steps: RunSteps, rollback: RollbackPhase):
        self.s = steps
        self.rollback = rollback

    def run(self, w: Wave) -> int | None:
        p = f"w{w.index}"
        label = f"wave {w.index + 1}/{len(self.s.state.data['waves'])} {w.name}"
        if w.pause and not self.s.state.step_done(f"{p}.pause"):
            if self.s.state.step(f"{p}.pause") is None:
                self.s.state.begin(f"{p}.pause")
                self.s.log.record("PAUSE", f"the plan pauses before {label}: `rollout resume {self.s.state.run_id}` "
                                  "continues", step=f"{p}.pause", wave=w.name, hosts=w.hosts)
            self.s.state.set_status(st.PAUSED)
            self.s.state.save()
            self.s.say(f"paused before {label}; resume with `fabricproof rollout resume {self.s.state.run_id}`")
            return ExitCode.HALTED
        self.s.say(f"{label}: {len(w.hosts)} host(s)")
        self.s.check_stop()

        if not self.s.state.step_done(f"{p}.pre_gate"):
            self._pre_gate(w)
        self.s.check_stop()
        pre_failed = {h: self.s.state.hosts[h]["reason"] for h in w.hosts if self.s.state.hosts[h]["state"] == st.EXCLUDED}
        if not self.s.state.step_done(f"{p}.pre_verdict"):
            verdict = judge(pre_failed, len(w.hosts), w.budget)
            if not verdict.proceed:
                sid = f"{p}.pre_verdict"
                self.s.state.begin(sid)
                why = f"pre-gate: {verdict.why}; nothing in this wave was changed"
                self.s.log.record(HALT, why, step=sid, wave=w.name, hosts=pre_failed,
                                  evidence=self.s.state.step(f"{p}.pre_gate").get("evidence", []))
                self.s.state.finish(sid, status="failed", why=why)
                return self._halt(w, why)
            self.s.state.begin(f"{p}.pre_verdict")
            self.s.state.finish(f"{p}.pre_verdict")

        if self.s.plan.drain and self.s.plan.drain.enabled and not self.s.state.step_done(f"{p}.drain"):
            self.s.drain(f"{p}.drain", w, self.s.state.hosts_in(st.PENDING, wave=w.index))
            self.s.check_stop()

        if self.s.ctx.probe is not None and not self.s.state.step_done(f"{p}.pre_probes"):
            self._pre_probes(w)
            self.s.check_stop()

        for j, batch in enumerate(w.batches):
            sid = f"{p}.apply.b{j}"
            if self.s.state.step_done(sid):
                continue
            hosts = [h for h in batch if self.s.state.hosts[h]["state"] in (st.PENDING, st.APPLYING)]
            self.s.apply_batch(sid, w, hosts, self.s.plan.apply.path, self.s.plan.apply.vars, "apply", self.s.ctx.after)
            self.s.check_stop()

        if not self.s.state.step_done(f"{p}.post_gate"):
            self._post_gate(w)
        self.s.check_stop()
        if self.s.plan.soak and w.soak_s is not None and not self.s.state.step_done(f"{p}.soak"):
            self._soak(w)
        self.s.check_stop()
        return self._decide(w)

    def _pre_gate(self, w: Wave) -> None:
        sid = f"w{w.index}.pre_gate"
        hosts = [h for h in w.hosts if self.s.state.hosts[h]["state"] in (st.PENDING, st.EXCLUDED)]
        self.s.state.begin(sid, hosts=hosts)
        if not hosts:  # resumed after every host was already touched: nothing left to pre-prove
            self.s.state.finish(sid, failed={})
            return
        result = self.s.gate("pre-gate", hosts, self.s.ctx.before, self.s.wave_dir(w, "pre-gate"), timeout_s=0)
        self.s.state.set_hosts(result.failed.keys(), st.EXCLUDED)
        for h, why in result.failed.items():
            self.s.state.hosts[h]["reason"] = f"pre-gate: {why}"
        self.s.state.set_hosts([h for h in hosts if h not in result.failed], st.PENDING, reason="")
        why = (f"{len(result.passed)} of {len(hosts)} host(s) proven on the before-baseline"
               + (f"; excluded from the change: {listing(result.failed)}"
                  if result.failed else ""))
        self.s.log.record("PRE_GATE", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence,
                          actions=result.actions)
        self.s.state.finish(sid, failed=result.failed, evidence=list(result.evidence), actions=result.actions)
        self.s.say(f"  pre-gate: {why}")

    def _post_gate(self, w: Wave) -> None:
        sid = f"w{w.index}.post_gate"
        hosts = self.s.state.hosts_in(st.APPLIED, st.PASSED, st.FAILED, wave=w.index)
        self.s.state.begin(sid, hosts=hosts)
        broken = self.s.state.hosts_in(st.APPLY_FAILED, wave=w.index)
        if broken:
            self._prove_broken(sid, w, broken)
        if not hosts:
            self.s.state.finish(sid, failed={})
            return
        result = self.s.gate("post-gate", hosts, self.s.ctx.after, self.s.wave_dir(w, "post-gate"),
                             timeout_s=self.s.plan.gates.timeout_s)
        self.s.settle("post-gate", result, st.PASSED, st.FAILED)
        why = (f"{len(result.passed)} of {len(hosts)} host(s) proven on the after-baseline after {result.attempts} "
               f"attempt(s)" + (f"; failed: {listing(result.failed)}"
                                if result.failed else ""))
        self.s.log.record("POST_GATE", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence,
                          actions=result.actions)
        failed = dict(result.failed)
        evidence = list(result.evidence)
        if self.s.ctx.probe is not None and result.passed:
            regressed, probe_evidence = self._post_probes(sid, w, result.passed)
            failed.update(regressed)
            evidence.append(probe_evidence)
        self.s.state.finish(sid, failed=failed, attempts=result.attempts, evidence=evidence, actions=result.actions)
        self.s.say(f"  post-gate: {why}")

    def _pre_probes(self, w: Wave) -> None:
        """The gate probes on the wave's hosts before the change (after the drain): each host's own figures, kept
        in the run state for its post-gate. A host with no figure cannot be compared: it is left out of the change."""
        sid = f"w{w.index}.pre_probes"
        hosts = self.s.state.hosts_in(st.PENDING, wave=w.index)
        self.s.state.begin(sid, hosts=hosts)
        evidence = fresh_dir(self.s.wave_dir(w, "pre-gate") / "probes")
        assert self.s.ctx.probe is not None
        figures, missing = self.s.ctx.probe(hosts, evidence, self.s.ctx.before) if hosts else ({}, {})
        for h in hosts:
            if h in figures:
                self.s.state.set_probe_before(h, figures[h])
            else:
                self.s.state.set_hosts([h], st.EXCLUDED, reason=f"pre-gate probes: {missing.get(h, 'no figure')}")
        why = (f"{len(figures)} of {len(hosts)} host(s) probed before the change ({', '.join(self.s.plan.gates.probes)})"
               + (f"; left out (nothing to compare with): {listing(missing)}" if missing else ""))
        self.s.log.record("PRE_PROBES", why, step=sid, wave=w.name, hosts=missing, evidence=[evidence],
                          figures=by_host_rows(figures))
        self.s.state.finish(sid, failed=missing, evidence=[str(evidence)])
        self.s.say(f"  pre-gate probes: {why}")

    def _post_probes(self, sid: str, w: Wave, hosts: Sequence[str]) -> tuple[dict[str, str], str]:
        """The gate probes again after the change; with a regression gate, a host whose figure dropped beyond the
        tolerance below its own pre-change figure fails, and the decision record holds both figures."""
        evidence = fresh_dir(self.s.wave_dir(w, "post-gate") / "probes")
        assert self.s.ctx.probe is not None
        after, missing = self.s.ctx.probe(list(hosts), evidence, self.s.ctx.after)
        tol = self.s.plan.gates.tolerance_pct

        before = {h: self.s.state.probe_before(h) for h in hosts}
        failed: dict[str, str] = {}
        if tol is not None:
            found = regressions([f for h in hosts for f in before[h]], [f for h in hosts for f in after.get(h, [])], tol)
            failed = {h: "regression gate: " + summarize(r, 2) for h, r in found.items()}
        self.s.state.set_hosts(list(failed), st.FAILED)
        for h, why in failed.items():
            self.s.state.hosts[h]["reason"] = why
        why = (f"{len(hosts) - len(failed)} of {len(hosts)} host(s) no worse than before the change"
               + (f" (tolerance {tol}%)" if tol is not None else "")
               + (f"; regressed: {listing(failed)}" if failed else ""))
        self.s.log.record("REGRESSION_GATE" if tol is not None else "POST_PROBES", why, step=sid, wave=w.name,
                          hosts=failed, evidence=[evidence, *self.s.state.step(f"w{w.index}.pre_probes")
                                                  .get("evidence", [])],
                          before=by_host_rows(before), after=by_host_rows({h: after.get(h, []) for h in hosts}),
                          not_measured=missing)
        self.s.say(f"  post-gate probes: {why}")
        return failed, str(evidence)

    def _prove_broken(self, sid: str, w: Wave, broken: list[str]) -> None:
        """Hosts whose apply failed are failed already; one proof (no retries) shows the state the playbook left."""
        proof = self.s.prove(broken, self.s.ctx.after, fresh_dir(self.s.wave_dir(w, "post-gate") / "apply-failed"))
        for h, reasons in proof.failures.items():
            self.s.state.hosts[h]["reason"] += f"; post-gate: {summarize(reasons, 2)}"
        if proof.failures:
            listing = summarize([f"{h}: {r[0]}" for h, r in proof.failures.items()], 2)
            why = (f"{len(proof.failures)} of {len(broken)} host(s) whose apply failed do not prove the "
                   f"after-baseline: {listing}")
        else:
            why = f"{len(broken)} host(s) whose apply failed prove the after-baseline; they stay failed all the same"
        self.s.log.record("POST_GATE", why, step=sid, wave=w.name, hosts=broken, evidence=proof.evidence,
                          actions=proof.actions)
        self.s.say(f"  post-gate (apply failed): {why}")

    def _soak(self, w: Wave) -> None:
        sid = f"w{w.index}.soak"
        hosts = self.s.state.hosts_in(st.PASSED, wave=w.index)
        soak = self.s.plan.soak
        assert soak is not None and w.soak_s is not None
        self.s.state.begin(sid, hosts=hosts, duration_s=w.soak_s)
        if not hosts:
            self.s.state.finish(sid, failed={})
            return
        self.s.say(f"  soak: {w.soak_s}s on {len(hosts)} host(s), watching {', '.join(soak.checks)}")
        result = run_soak(hosts, self.s.ctx.after, self.s.ctx.soak_checks, self.s.ctx.collect, fresh_dir(self.s.wave_dir(w, "soak")),
                          duration_s=w.soak_s, interval_s=soak.interval_s, groups=dict(self.s.ctx.groups),
                          fail_on=self.s.plan.gates.fail_on, formats=self.s.plan.reports, run_id=self.s.state.run_id,
                          clock=self.s.ctx.clock, should_stop=self.s.should_stop)
        if result.stopped:
            raise Stopped()
        for h, why in result.failed.items():
            self.s.state.set_hosts([h], st.FAILED, reason=f"soak: {why}")
        why = (f"counters flat on {len(result.passed)} of {len(hosts)} host(s) over {w.soak_s}s "
               f"({result.attempts} read(s))" + (f"; grew: {listing(result.failed)}"
                                                 if result.failed else ""))
        self.s.log.record("SOAK", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence,
                          actions=result.actions)
        self.s.state.finish(sid, failed=result.failed, evidence=list(result.evidence), actions=result.actions)
        self.s.say(f"  soak: {why}")

    def _decide(self, w: Wave) -> int | None:
        p = f"w{w.index}"
        sid = f"{p}.decide"
        failed = {h: d["reason"] for h in w.hosts for d in [self.s.state.hosts[h]]
                  if d["state"] in (st.EXCLUDED, st.APPLY_FAILED, st.FAILED, st.HOST_ROLLED_BACK,
                                    st.HOST_ROLLBACK_FAILED, st.ROLLING_BACK)}
        verdict = judge(failed, len(w.hosts), w.budget)
        evidence = [e for s in ("post_gate", "soak") for e in (self.s.state.step(f"{p}.{s}") or {}).get("evidence", [])]
        # Each failed host's action as its gates found it, the latest gate's last (the soak's over the post-gate's).
        actions = {h: a for s in ("pre_gate", "post_gate", "soak")
                   for h, a in ((self.s.state.step(f"{p}.{s}") or {}).get("actions") or {}).items() if h in failed}
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
        if changed_failed and policy != "halt" and not self.s.state.step_done(f"{p}.failed_rollback"):
            self.s.state.begin(f"{p}.failed_rollback")
            self.rollback.start([w], reason=f"{len(changed_failed)} host(s) of {w.name} failed within the budget",
                                then="continue", limit_hosts=changed_failed, done_step=f"{p}.failed_rollback")
            self.rollback.run()
        if self.s.plan.drain and self.s.plan.drain.enabled and not self.s.state.step_done(f"{p}.undrain"):
            self.s.undrain(f"{p}.undrain", w, self.s.state.hosts_in(st.PASSED, wave=w.index))
        self.s.state.begin(f"{p}.done")
        self.s.state.finish(f"{p}.done")
        return None

    def _logged_decision(self, sid: str) -> dict[str, Any] | None:
        """The verdict the decision log holds for this step since it last began (an earlier, forgotten execution
        of the step may have logged another), if any."""
        since = (self.s.state.step(sid) or {}).get("log_records", 0)
        found = [d for d in decisions.read(self.s.state.dir)[since:] if d.get("step") == sid and d.get("what") in VERDICTS]
        return found[-1] if found else None

    def _halt(self, w: Wave, why: str) -> int:
        self.s.state.set_status(st.HALTED)
        self.s.state.data["halted_wave"] = w.index
        self.s.state.save()
        self.s.say(f"halted at {w.name}: {why}")
        return ExitCode.CHECK_FAILED
