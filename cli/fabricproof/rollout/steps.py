"""What every step of a rollout run does the same way, wave or rollback: stop checks, proofs and gates, playbook
runs, drain/undrain, and applying a batch so that a run killed mid-batch never applies a host twice."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judging.baseline import Baseline
from ..judging.catalog import Check
from ..collect import DEFAULT_FORKS
from ..timeutil import utc_now
from . import state as st
from . import store
from .decisions import DecisionLog
from .gate import Clock, Collect, GateResult, Proof, RealClock, prove, run_gate, summarize
from .plan import Plan, Wave
from .playbook import PlaybookResult
from .stepid import StepId
from .store import RolloutStore

RunPlaybook = Callable[..., PlaybookResult]


@dataclass
class Context:
    """Everything a run needs besides its state: the plan, the loaded baselines and checks, and the seams
    (collection, playbooks, clock) that tests replace."""

    plan: Plan
    inventory_path: str
    groups: Mapping[str, Sequence[str]]
    before: Baseline
    after: Baseline
    gate_checks: Sequence[Check]
    soak_checks: Sequence[Check]
    collect: Collect
    run_playbook: RunPlaybook
    clock: Clock = field(default_factory=RealClock)
    progress: Callable[[str], None] = lambda _msg: None
    forks: int = DEFAULT_FORKS  # hosts a playbook changes at once
    #: What each gate kind of the plan measures its hosts with (`GateKind.live`), by its name.
    gate_seams: Mapping[str, Any] = field(default_factory=dict)

    def seam(self, kind: str) -> Any:
        """The live part of gate kind `kind`, which the plan uses (so the run made it)."""
        return self.gate_seams[kind]


class Stopped(Exception):
    """An abort or a signal arrived; the run stops at this step boundary."""


def listing(failed: Mapping[str, str], limit: int = 2) -> str:
    """'h1: reason; h2: reason (+3 more)' for decision texts."""
    return summarize([f"{h}: {r}" for h, r in failed.items()], limit)


class RunSteps:
    """One run's context, state and decision log, and the step actions waves and rollbacks share."""

    def __init__(self, ctx: Context, state: st.RunState, log: DecisionLog):
        self.ctx = ctx
        self.state = state
        self.log = log
        self.plan = ctx.plan
        self.store = RolloutStore(state.dir)
        self.signal: int | None = None  # set by the executor's signal handler

    def say(self, msg: str) -> None:
        self.ctx.progress(msg)

    def should_stop(self) -> bool:
        return self.signal is not None or self.store.abort_path.exists()

    def check_stop(self) -> None:
        if self.should_stop():
            raise Stopped()

    def wave_dir(self, w: Wave, *parts: str) -> Path:
        return self.store.wave_dir(w.index, w.name, *parts)

    def prove(self, hosts: Sequence[str], baseline: Baseline, evidence: Path) -> Proof:
        return prove(hosts, baseline, self.ctx.gate_checks, self.ctx.collect, evidence, groups=self.ctx.groups,
                     fail_on=self.plan.gates.fail_on, formats=self.plan.reports, run_id=self.state.run_id)

    def gate(self, name: str, hosts: Sequence[str], baseline: Baseline, evidence: Path, timeout_s: int) -> GateResult:
        """Prove hosts until they pass or the gate's time is up; attempts are evidence/attempt-N, numbered on
        from the attempts of an execution a kill cut short."""
        g = self.plan.gates
        first = store.next_attempt(evidence)

        def attempt(n: int) -> Proof:
            proof = self.prove(hosts, baseline, store.attempt_dir(evidence, first + n - 1))
            if proof.failures and n == 1 and timeout_s:
                self.say(f"  {name}: {len(proof.failures)} host(s) not proven yet; retrying every "
                         f"{g.retry_interval_s}s for up to {timeout_s}s")
            return proof

        result = run_gate(name, hosts, attempt, retry_interval_s=g.retry_interval_s, timeout_s=timeout_s,
                          clock=self.ctx.clock, should_stop=self.should_stop)
        if result.stopped:
            raise Stopped()
        return result

    def settle(self, gate: str, result: GateResult, passed: str, failed: str, passed_reason: str = "") -> None:
        """Hosts a gate proved move to `passed`; the others to `failed`, each with the gate's reason."""
        self.state.set_hosts(result.passed, passed, reason=passed_reason)
        for h, why in result.failed.items():
            self.state.set_hosts([h], failed, reason=f"{gate}: {why}")

    def playbook(self, path: Path, hosts: Sequence[str], extravars: Mapping[str, Any], sid: StepId) -> PlaybookResult:
        attempt = (self.state.step(sid) or {}).get("attempts", 1)
        ident = f"{self.state.run_id}_{str(sid).replace('.', '_')}_{attempt}"
        return self.ctx.run_playbook(path, inventory=self.ctx.inventory_path, hosts=list(hosts),
                                     extravars=extravars, private_dir=self.store.ansible_dir, ident=ident,
                                     forks=self.ctx.forks)

    def vars(self, wave: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        reason = f"fabricproof: {self.plan.name} run {self.state.run_id}"
        return {**extra, "fabricproof_run_id": self.state.run_id, "fabricproof_change": self.plan.name,
                "fabricproof_wave": wave, "fabricproof_reason": reason}

    def _scheduler_step(self, sid: StepId, w: Wave, hosts: list[str], playbook: Path) -> Any:
        """Begin a drain/undrain step and run its playbook; None (step finished) when no host needs it."""
        drain = self.plan.drain
        assert drain is not None
        self.state.begin(sid, hosts=list(hosts))
        if not hosts:
            self.state.finish(sid, ran=False)
            return None
        return self.playbook(playbook, hosts, self.vars(w.name, {"fabricproof_scheduler": drain.scheduler,
                                                                 **drain.vars}), sid)

    def drain(self, sid: StepId, w: Wave, hosts: Sequence[str]) -> None:
        drain = self.plan.drain
        assert drain is not None
        hosts = [h for h in hosts if not self.state.hosts[h].get("drained")]
        res = self._scheduler_step(sid, w, hosts, drain.drain)
        if res is None:
            return
        for h in res.changed:  # this run holds their drain: undrain gives them back
            self.state.hosts[h]["drained"] = True
        others = [h for h in res.ok if h not in res.changed]  # drained by someone else: they stay so afterwards
        rollback = self.state.data["phase"] == "rollback"
        for h, why in res.failed.items():
            if rollback:  # never roll back a host whose jobs are still running
                self.state.set_hosts([h], st.HOST_ROLLBACK_FAILED, reason=f"not drained, so not rolled back: {why}")
                self.state.mark([h], "rollback", skipped=self.state.data["rollback"]["id"])
            elif self.state.hosts[h]["state"] == st.PENDING:
                self.state.set_hosts([h], st.EXCLUDED, reason=f"drain failed: {why}")
        self.log.record("DRAIN", f"{drain.scheduler}: {len(res.changed)} of {len(hosts)} host(s) drained by this run"
                        + (f"; already drained by someone else, changed and left drained: {summarize(others, 3)}"
                           if others else "")
                        + (f"; not drained (left out of the change): {summarize(list(res.failed), 3)}"
                           if res.failed else ""),
                        step=sid, wave=w.name, hosts=hosts, evidence=[res.artifacts])
        self.state.finish(sid, failed=res.failed, artifacts=res.artifacts)
        self.say(f"  drain: {len(res.changed)} of {len(hosts)} drained" + (f", {len(others)} already drained"
                                                                            if others else ""))

    def undrain(self, sid: StepId, w: Wave, hosts: Sequence[str]) -> None:
        drain = self.plan.drain
        assert drain is not None
        hosts = [h for h in hosts if self.state.hosts[h].get("drained")]
        res = self._scheduler_step(sid, w, hosts, drain.undrain)
        if res is None:
            return
        for h in res.ok:
            self.state.hosts[h]["drained"] = False
        kept = [h for h in res.ok if h not in res.changed]  # their drain is no longer this run's: left to its owner
        self.log.record("UNDRAIN", f"{drain.scheduler}: {len(res.changed)} of {len(hosts)} proven host(s) back in "
                        "service" + (f"; drained again by someone else meanwhile, left drained: {summarize(kept, 3)}"
                                     if kept else "")
                        + (f"; still drained: {listing(res.failed)}" if res.failed else ""),
                        step=sid, wave=w.name, hosts=hosts, evidence=[res.artifacts])
        self.state.finish(sid, failed=res.failed, artifacts=res.artifacts)
        self.say(f"  undrain: {len(res.changed)} of {len(hosts)} back in service")

    def apply_batch(self, sid: StepId, w: Wave, hosts: list[str], playbook: Path, extra: Mapping[str, Any],
                    key: str, target: Baseline, rollback_state: tuple[str, str] | None = None) -> None:
        """Apply (or roll back) one batch. Per host: `started` is durable before the playbook runs, `done` after.
        On resume, a host whose `started` has no `done` is in doubt: if it already proves the target baseline it
        is not touched again; otherwise the idempotent playbook runs on it once more to finish the change."""
        doing, ok_state, failed_state = rollback_state or (st.APPLYING, st.APPLIED, st.APPLY_FAILED)
        what = "APPLY" if key == "apply" else "ROLLBACK_APPLY"
        if self.state.step(sid) is not None:
            in_doubt = [h for h in self.state.in_doubt(key) if h in hosts]
            untouched = [h for h in hosts if not (self.state.hosts[h].get(key) or {}).get("started")]
            proven: list[str] = []
            if in_doubt:
                probe_dir = store.fresh_dir(self._evidence_dir(w, key) / f"{store.IN_DOUBT_PREFIX}{sid.batch_label}")
                proof = self.prove(in_doubt, target, probe_dir)
                proven = [h for h in in_doubt if h not in proof.failures]
                if proven:
                    self.state.mark(proven, key, done=utc_now(), ok=True, recovered=True)
                    self.state.set_hosts(proven, ok_state, reason="")
                    self.log.record(f"{what}_RECOVERED", "the run stopped while this batch was running; these hosts "
                                    "already prove the target baseline, so the playbook is not run on them again",
                                    step=sid, wave=w.name, hosts=proven, evidence=proof.evidence)
                retry = [h for h in in_doubt if h not in proven]
                if retry:
                    self.log.record(f"{what}_RETRY", "the run stopped while this batch was running and these hosts do "
                                    "not prove the target baseline yet: the idempotent playbook runs on them again to "
                                    "finish the change (steps already done are skipped)",
                                    step=sid, wave=w.name, hosts=retry, evidence=proof.evidence)
            hosts = [h for h in hosts if h not in proven]
            hosts = [h for h in hosts if h in in_doubt or h in untouched]
        self.state.mark(hosts, key, started=utc_now(), done=None, ok=None)
        self.state.set_hosts(hosts, doing)
        self.state.begin(sid, hosts=list(hosts))
        if not hosts:
            self.state.finish(sid, ran=False)
            return
        self.log.record(what, f"running {playbook.name} on {len(hosts)} host(s)", step=sid, wave=w.name, hosts=hosts)
        self.say(f"  {key}: {playbook.name} on {', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''}")
        res = self.playbook(playbook, hosts, self.vars(w.name, extra), sid)
        now = utc_now()
        self.state.mark(res.ok, key, done=now, ok=True)
        self.state.set_hosts(res.ok, ok_state, reason="")
        for h, why in res.failed.items():
            self.state.mark([h], key, done=now, ok=False, error=why)
            self.state.set_hosts([h], failed_state, reason=f"{key} failed: {why}")
        if res.failed:  # the playbook's own words: the gate that follows only says the host does not prove
            self.say(f"  {key} failed on {len(res.failed)} of {len(hosts)} host(s): {listing(res.failed)}")
        self.log.record(f"{what}_DONE", f"{playbook.name}: {len(res.ok)} ok, {len(res.failed)} failed ({res.status})"
                        + (f": {listing(res.failed)}" if res.failed else ""),
                        step=sid, wave=w.name, hosts=hosts, evidence=[res.artifacts])
        self.state.finish(sid, failed=res.failed, artifacts=res.artifacts, ok=list(res.ok))

    def _evidence_dir(self, w: Wave, key: str) -> Path:
        rb = self.state.data.get("rollback") or {}
        if key == "apply":
            return self.store.wave_dir(w.index, w.name)
        return self.store.rollback_dir(rb.get("id", 1), w.index, w.name)
