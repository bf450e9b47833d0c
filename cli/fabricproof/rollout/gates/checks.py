"""The checks gate: the plan's checks proven on a wave's hosts before the change (the before-baseline, once) and
after it (the after-baseline, retried until they pass or the gate's time is up); also the rollback's gate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import Problem
from .. import state as st
from .. import store
from ..gate import summarize
from ..stepid import StepId
from ..steps import listing
from .base import ATTEMPTS, NAMES, POST, PRE, Block, GateKind, StepForm, catalog_matches

if TYPE_CHECKING:
    from ..plan import Wave
    from ..steps import RunSteps

PRE_GATE, POST_GATE, ROLLBACK_GATE = "pre_gate", "post_gate", "gate"


class ChecksGate(GateKind):
    name = "checks"
    schema = {"checks": {**NAMES, "description": "Check ids, globs or families (as `validate --checks`). Default: the "
                                                 "whole catalog."}}
    steps = {PRE_GATE: StepForm("pre-gate", ATTEMPTS), POST_GATE: StepForm("post-gate", ATTEMPTS),
             ROLLBACK_GATE: StepForm("rollback gate", ATTEMPTS)}
    before_stage, before_step = PRE, PRE_GATE
    after_stage, after_step = POST, POST_GATE

    def parse(self, block: Block, problems: list[Problem]) -> tuple[str, ...]:
        """Catalog patterns; empty: the whole catalog (the checks gate is in every plan)."""
        patterns = tuple(block.spec["gates"].get("checks") or ())
        for i, pat in enumerate(patterns):
            if not catalog_matches(pat, block.catalog):
                problems.append(block.problem(("spec", "gates", "checks", i), f"{pat!r} matches no check id or family"))
        return patterns

    def before(self, run: RunSteps, w: Wave, spec: Any) -> None:
        sid = StepId(w.index, PRE_GATE)
        hosts = [h for h in w.hosts if run.state.hosts[h]["state"] in (st.PENDING, st.EXCLUDED)]
        run.state.begin(sid, hosts=hosts)
        if not hosts:  # resumed after every host was already touched: nothing left to pre-prove
            run.state.finish(sid, failed={}, ran=False)
            return
        result = run.gate("pre-gate", hosts, run.ctx.before, run.wave_dir(w, store.PRE_GATE_DIR), timeout_s=0)
        run.state.set_hosts(result.failed.keys(), st.EXCLUDED)
        for h, why in result.failed.items():
            run.state.hosts[h]["reason"] = f"pre-gate: {why}"
        run.state.set_hosts([h for h in hosts if h not in result.failed], st.PENDING, reason="")
        why = (f"{len(result.passed)} of {len(hosts)} host(s) proven on the before-baseline"
               + (f"; excluded from the change: {listing(result.failed)}"
                  if result.failed else ""))
        run.log.record("PRE_GATE", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence,
                       actions=result.actions)
        run.state.finish(sid, failed=result.failed, evidence=list(result.evidence), actions=result.actions)
        run.say(f"  pre-gate: {why}")

    def after(self, run: RunSteps, w: Wave, spec: Any) -> None:
        """The post-gate step: hosts whose apply failed proven once, the others until they pass; then every gate
        that joins the post-gate, on the hosts this one proved."""
        sid = StepId(w.index, POST_GATE)
        hosts = run.state.hosts_in(st.APPLIED, st.PASSED, st.FAILED, wave=w.index)
        run.state.begin(sid, hosts=hosts)
        broken = run.state.hosts_in(st.APPLY_FAILED, wave=w.index)
        # Hosts whose apply failed fail this gate too: the step names them with why and keeps their proof's evidence.
        broken_evidence = self._prove_broken(run, sid, w, broken) if broken else []
        broken_failed = {h: run.state.hosts[h]["reason"] for h in broken}
        if not hosts:
            run.state.finish(sid, failed=broken_failed, evidence=broken_evidence, **({} if broken else {"ran": False}))
            return
        result = run.gate("post-gate", hosts, run.ctx.after, run.wave_dir(w, store.POST_GATE_DIR),
                          timeout_s=run.plan.gates.timeout_s)
        run.settle("post-gate", result, st.PASSED, st.FAILED)
        why = (f"{len(result.passed)} of {len(hosts)} host(s) proven on the after-baseline after {result.attempts} "
               f"attempt(s)" + (f"; failed: {listing(result.failed)}"
                                if result.failed else ""))
        run.log.record("POST_GATE", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence,
                       actions=result.actions)
        failed = {**broken_failed, **result.failed}
        evidence = [*result.evidence, *broken_evidence]
        if result.passed:
            for kind, other in run.plan.gates.joining():
                joined_failed, joined_evidence = kind.join(run, w, other, sid, result.passed)
                failed.update(joined_failed)
                evidence.append(joined_evidence)
        run.state.finish(sid, failed=failed, attempts=result.attempts, evidence=evidence, actions=result.actions)
        run.say(f"  post-gate: {why}")

    def _prove_broken(self, run: RunSteps, sid: StepId, w: Wave, broken: list[str]) -> list[str]:
        """Hosts whose apply failed are failed already; one proof (no retries) shows the state the playbook left."""
        proof = run.prove(broken, run.ctx.after, store.fresh_dir(run.wave_dir(w, store.POST_GATE_DIR)
                                                                 / store.APPLY_FAILED_DIR))
        for h, reasons in proof.failures.items():
            run.state.hosts[h]["reason"] += f"; post-gate: {summarize(reasons, 2)}"
        if proof.failures:
            listing = summarize([f"{h}: {r[0]}" for h, r in proof.failures.items()], 2)
            why = (f"{len(proof.failures)} of {len(broken)} host(s) whose apply failed do not prove the "
                   f"after-baseline: {listing}")
        else:
            why = f"{len(broken)} host(s) whose apply failed prove the after-baseline; they stay failed all the same"
        run.log.record("POST_GATE", why, step=sid, wave=w.name, hosts=broken, evidence=proof.evidence,
                       actions=proof.actions)
        run.say(f"  post-gate (apply failed): {why}")
        return list(proof.evidence)

    def rollback_gate(self, run: RunSteps, sid: StepId, w: Wave, hosts: Sequence[str], n: int) -> None:
        """The rollback phase's gate on a wave: the hosts put back, proven on the before-baseline."""
        todo = [h for h in hosts if run.state.hosts[h]["state"] == st.ROLLING_BACK]
        run.state.begin(sid, hosts=todo)
        if not todo:
            run.state.finish(sid, failed={}, ran=False)
            return
        result = run.gate("rollback gate", todo, run.ctx.before,
                          run.store.rollback_dir(n, w.index, w.name, store.ROLLBACK_GATE_DIR),
                          timeout_s=run.plan.gates.timeout_s)
        run.settle("rollback gate", result, st.HOST_ROLLED_BACK, st.HOST_ROLLBACK_FAILED,
                   passed_reason="rolled back and proven on the before-baseline")
        why = (f"{len(result.passed)} of {len(todo)} host(s) proven on the before-baseline after the rollback"
               + (f"; not proven: {listing(result.failed)}"
                  if result.failed else ""))
        run.log.record("ROLLBACK_GATE", why, step=sid, wave=w.name, hosts=todo, evidence=result.evidence,
                       actions=result.actions)
        run.state.finish(sid, failed=result.failed, attempts=result.attempts, evidence=list(result.evidence))
        run.say(f"  rollback gate: {why}")


GATE = ChecksGate()
