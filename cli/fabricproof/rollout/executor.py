"""The rollout executor: for each wave pre-gate -> drain -> apply -> post-gate -> soak -> decide -> undrain, and the
rollback that runs when the proof fails. Every step is recorded in state.json before and after it acts, and every
decision in decisions.jsonl, so a run killed at any point resumes without applying any host twice."""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..baseline import Baseline
from ..catalog import Check
from ..model import ExitCode
from ..timeutil import utc_now
from . import state as st
from .decisions import HALT, PROCEED, ROLLBACK, DecisionLog
from .gate import (
    Clock,
    Collect,
    GateResult,
    Proof,
    RealClock,
    judge,
    prove,
    run_gate,
    summarize,
)
from .plan import Plan, Wave
from .playbook import PlaybookResult
from .soak import run_soak

ABORT_FILE = "abort-requested"
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


class Stopped(Exception):
    """An abort or a signal arrived; the run stops at this step boundary."""


class Executor:
    def __init__(self, ctx: Context, state: st.RunState, log: DecisionLog):
        self.ctx = ctx
        self.state = state
        self.log = log
        self.plan = ctx.plan
        self._signal: int | None = None

    # ---------------------------------------------------------------------------------- plumbing
    def _say(self, msg: str) -> None:
        self.ctx.progress(msg)

    def should_stop(self) -> bool:
        return self._signal is not None or (self.state.dir / ABORT_FILE).exists()

    def _check_stop(self) -> None:
        if self.should_stop():
            raise Stopped()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signal = signum
        self._say(f"received {signal.Signals(signum).name}: stopping after the current step "
                  "(a running playbook finishes its batch)")
        signal.signal(signum, signal.SIG_DFL)  # a second signal acts at once

    def _evidence_dir(self, *parts: str) -> Path:
        d = self.state.dir.joinpath(*parts)
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        return d

    def _wave_dir(self, w: Wave, *parts: str) -> Path:
        return self._evidence_dir("waves", f"{w.index + 1}-{w.name}", *parts)

    def _prove(self, hosts: Sequence[str], baseline: Baseline, evidence: Path) -> Proof:
        return prove(hosts, baseline, self.ctx.gate_checks, self.ctx.collect, evidence, groups=self.ctx.groups,
                     fail_on=self.plan.gates.fail_on, formats=self.plan.reports, run_id=self.state.run_id)

    def _gate(self, name: str, hosts: Sequence[str], baseline: Baseline, evidence: Path, timeout_s: int) -> GateResult:
        g = self.plan.gates

        def attempt(n: int) -> Proof:
            proof = self._prove(hosts, baseline, evidence / f"attempt-{n}")
            if proof.failures and n == 1 and timeout_s:
                self._say(f"  {name}: {len(proof.failures)} host(s) not proven yet; retrying every "
                          f"{g.retry_interval_s}s for up to {timeout_s}s")
            return proof

        result = run_gate(name, hosts, attempt, retry_interval_s=g.retry_interval_s, timeout_s=timeout_s,
                          clock=self.ctx.clock, should_stop=self.should_stop)
        if result.stopped:
            raise Stopped()
        return result

    def _settle(self, gate: str, result: GateResult, passed: str, failed: str, passed_reason: str = "") -> None:
        """Hosts a gate proved move to `passed`; the others to `failed`, each with the gate's reason."""
        self.state.set_hosts(result.passed, passed, reason=passed_reason)
        for h, why in result.failed.items():
            self.state.set_hosts([h], failed, reason=f"{gate}: {why}")

    def _playbook(self, path: Path, hosts: Sequence[str], extravars: Mapping[str, Any], sid: str) -> PlaybookResult:
        attempt = (self.state.step(sid) or {}).get("attempts", 1)
        ident = f"{self.state.run_id}_{sid.replace('.', '_')}_{attempt}"
        return self.ctx.run_playbook(path, inventory=self.ctx.inventory_path, hosts=list(hosts),
                                     extravars=extravars, private_dir=self.state.dir / "ansible", ident=ident)

    def _vars(self, wave: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        reason = f"fabricproof: {self.plan.name} run {self.state.run_id}"
        return {**extra, "fabricproof_run_id": self.state.run_id, "fabricproof_change": self.plan.name,
                "fabricproof_wave": wave, "fabricproof_reason": reason}

    # ------------------------------------------------------------------------------------ driver
    def run(self) -> int:
        """Drive the run from where its state stands to a stopping point; returns the exit code."""
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():  # Python delivers signals to the main thread only
            previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.state.set_status(st.RUNNING)  # exit code 130 on disk until a verdict: dying now is an interruption
            self.state.save()
            return self._drive()
        except Stopped:
            return self._stopped()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _drive(self) -> int:
        if self.state.data["phase"] == "rollback":
            code = self._rollback_phase()
            if code is not None:
                return code
        for w in self.state.waves:
            if self.state.step_done(f"w{w.index}.done"):
                continue
            code = self._wave(w)
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
        self._say(why)
        return ExitCode.HALTED if stuck else ExitCode.OK

    def _stopped(self) -> int:
        if (self.state.dir / ABORT_FILE).exists():
            self.state.set_status(st.ABORTED)
            self.state.save()
            self._say("aborted: hosts stay as they are (drained hosts stay drained); see `rollout status`")
            return ExitCode.HALTED
        name = signal.Signals(self._signal).name if self._signal else "a signal"
        self.log.record("INTERRUPTED", f"{name} received; `rollout resume {self.state.run_id}` continues from here")
        self.state.set_status(st.INTERRUPTED)
        self.state.save()
        return ExitCode.INTERRUPTED

    # ------------------------------------------------------------------------------------- waves
    def _wave(self, w: Wave) -> int | None:
        p = f"w{w.index}"
        label = f"wave {w.index + 1}/{len(self.state.data['waves'])} {w.name}"
        if w.pause and not self.state.step_done(f"{p}.pause"):
            if self.state.step(f"{p}.pause") is None:
                self.state.begin(f"{p}.pause")
                self.log.record("PAUSE", f"the plan pauses before {label}: `rollout resume {self.state.run_id}` "
                                         "continues", step=f"{p}.pause", wave=w.name, hosts=w.hosts)
            self.state.set_status(st.PAUSED)
            self.state.save()
            self._say(f"paused before {label}; resume with `fabricproof rollout resume {self.state.run_id}`")
            return ExitCode.HALTED
        self._say(f"{label}: {len(w.hosts)} host(s)")
        self._check_stop()

        if not self.state.step_done(f"{p}.pre_gate"):
            self._pre_gate(w)
        self._check_stop()
        pre_failed = {h: self.state.hosts[h]["reason"] for h in w.hosts if self.state.hosts[h]["state"] == st.EXCLUDED}
        if not self.state.step_done(f"{p}.pre_verdict"):
            verdict = judge(pre_failed, len(w.hosts), w.budget)
            if not verdict.proceed:
                sid = f"{p}.pre_verdict"
                self.state.begin(sid)
                why = f"pre-gate: {verdict.why}; nothing in this wave was changed"
                self.log.record(HALT, why, step=sid, wave=w.name, hosts=pre_failed,
                                evidence=self.state.step(f"{p}.pre_gate").get("evidence", []))
                self.state.finish(sid, status="failed", why=why)
                return self._halt(w, why)
            self.state.begin(f"{p}.pre_verdict")
            self.state.finish(f"{p}.pre_verdict")

        if self.plan.drain and self.plan.drain.enabled and not self.state.step_done(f"{p}.drain"):
            self._drain(f"{p}.drain", w, self.state.hosts_in(st.PENDING, wave=w.index))
            self._check_stop()

        for j, batch in enumerate(w.batches):
            sid = f"{p}.apply.b{j}"
            if self.state.step_done(sid):
                continue
            hosts = [h for h in batch if self.state.hosts[h]["state"] in (st.PENDING, st.APPLYING)]
            self._apply_batch(sid, w, hosts, self.plan.apply.path, self.plan.apply.vars, "apply", self.ctx.after)
            self._check_stop()

        if not self.state.step_done(f"{p}.post_gate"):
            self._post_gate(w)
        self._check_stop()
        if self.plan.soak and w.soak_s is not None and not self.state.step_done(f"{p}.soak"):
            self._soak(w)
        self._check_stop()
        return self._decide(w)

    def _pre_gate(self, w: Wave) -> None:
        sid = f"w{w.index}.pre_gate"
        hosts = [h for h in w.hosts if self.state.hosts[h]["state"] in (st.PENDING, st.EXCLUDED)]
        self.state.begin(sid, hosts=hosts)
        if not hosts:  # resumed after every host was already touched: nothing left to pre-prove
            self.state.finish(sid, failed={})
            return
        result = self._gate("pre-gate", hosts, self.ctx.before, self._wave_dir(w, "pre-gate"), timeout_s=0)
        self.state.set_hosts(result.failed.keys(), st.EXCLUDED)
        for h, why in result.failed.items():
            self.state.hosts[h]["reason"] = f"pre-gate: {why}"
        self.state.set_hosts([h for h in hosts if h not in result.failed], st.PENDING, reason="")
        why = (f"{len(result.passed)} of {len(hosts)} host(s) proven on the before-baseline"
               + (f"; excluded from the change: {_listing(result.failed)}"
                  if result.failed else ""))
        self.log.record("PRE_GATE", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence)
        self.state.finish(sid, failed=result.failed, evidence=list(result.evidence))
        self._say(f"  pre-gate: {why}")

    def _scheduler_step(self, sid: str, w: Wave, hosts: list[str], playbook: Path) -> Any:
        """Begin a drain/undrain step and run its playbook; None (step finished) when no host needs it."""
        drain = self.plan.drain
        assert drain is not None
        self.state.begin(sid, hosts=list(hosts))
        if not hosts:
            self.state.finish(sid)
            return None
        return self._playbook(playbook, hosts, self._vars(w.name, {"fabricproof_scheduler": drain.scheduler,
                                                                   **drain.vars}), sid)

    def _drain(self, sid: str, w: Wave, hosts: Sequence[str]) -> None:
        drain = self.plan.drain
        assert drain is not None
        hosts = [h for h in hosts if not self.state.hosts[h].get("drained")]
        res = self._scheduler_step(sid, w, hosts, drain.drain)
        if res is None:
            return
        for h in res.ok:
            self.state.hosts[h]["drained"] = True
        rollback = self.state.data["phase"] == "rollback"
        for h, why in res.failed.items():
            if rollback:  # never roll back a host whose jobs are still running
                self.state.set_hosts([h], st.HOST_ROLLBACK_FAILED, reason=f"not drained, so not rolled back: {why}")
                self.state.mark([h], "rollback", skipped=self.state.data["rollback"]["id"])
            elif self.state.hosts[h]["state"] == st.PENDING:
                self.state.set_hosts([h], st.EXCLUDED, reason=f"drain failed: {why}")
        self.log.record("DRAIN", f"{drain.scheduler}: {len(res.ok)} of {len(hosts)} host(s) drained"
                        + (f"; not drained (left out of the change): {summarize(list(res.failed), 3)}"
                           if res.failed else ""),
                        step=sid, wave=w.name, hosts=hosts, evidence=[res.artifacts])
        self.state.finish(sid, failed=res.failed, artifacts=res.artifacts)
        self._say(f"  drain: {len(res.ok)} of {len(hosts)} drained")

    def _apply_batch(self, sid: str, w: Wave, hosts: list[str], playbook: Path, extra: Mapping[str, Any],
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
                proof = self._prove(in_doubt, target, self._evidence_dir(
                    *self._evidence_parts(w, key), f"in-doubt-{(self.state.step(sid) or {}).get('attempts', 1)}"))
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
            self.state.finish(sid)
            return
        self.log.record(what, f"running {playbook.name} on {len(hosts)} host(s)", step=sid, wave=w.name, hosts=hosts)
        self._say(f"  {key}: {playbook.name} on {', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''}")
        res = self._playbook(playbook, hosts, self._vars(w.name, extra), sid)
        now = utc_now()
        self.state.mark(res.ok, key, done=now, ok=True)
        self.state.set_hosts(res.ok, ok_state, reason="")
        for h, why in res.failed.items():
            self.state.mark([h], key, done=now, ok=False, error=why)
            self.state.set_hosts([h], failed_state, reason=f"{key} failed: {why}")
        self.log.record(f"{what}_DONE", f"{playbook.name}: {len(res.ok)} ok, {len(res.failed)} failed ({res.status})"
                        + (f": {_listing(res.failed)}" if res.failed else ""),
                        step=sid, wave=w.name, hosts=hosts, evidence=[res.artifacts])
        self.state.finish(sid, failed=res.failed, artifacts=res.artifacts, ok=list(res.ok))

    def _evidence_parts(self, w: Wave, key: str) -> tuple[str, ...]:
        rb = self.state.data.get("rollback") or {}
        if key == "apply":
            return ("waves", f"{w.index + 1}-{w.name}")
        return (f"rollback-{rb.get('id', 1)}", f"{w.index + 1}-{w.name}")

    def _post_gate(self, w: Wave) -> None:
        sid = f"w{w.index}.post_gate"
        hosts = self.state.hosts_in(st.APPLIED, st.PASSED, st.FAILED, wave=w.index)
        self.state.begin(sid, hosts=hosts)
        broken = self.state.hosts_in(st.APPLY_FAILED, wave=w.index)
        if broken:
            self._prove_broken(sid, w, broken)
        if not hosts:
            self.state.finish(sid, failed={})
            return
        result = self._gate("post-gate", hosts, self.ctx.after, self._wave_dir(w, "post-gate"),
                            timeout_s=self.plan.gates.timeout_s)
        self._settle("post-gate", result, st.PASSED, st.FAILED)
        why = (f"{len(result.passed)} of {len(hosts)} host(s) proven on the after-baseline after {result.attempts} "
               f"attempt(s)" + (f"; failed: {_listing(result.failed)}"
                                if result.failed else ""))
        self.log.record("POST_GATE", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence)
        self.state.finish(sid, failed=result.failed, attempts=result.attempts, evidence=list(result.evidence))
        self._say(f"  post-gate: {why}")

    def _prove_broken(self, sid: str, w: Wave, broken: list[str]) -> None:
        """Hosts whose apply failed are failed already; one proof (no retries) shows the state the playbook left."""
        proof = self._prove(broken, self.ctx.after, self._wave_dir(w, "post-gate", "apply-failed"))
        for h, reasons in proof.failures.items():
            self.state.hosts[h]["reason"] += f"; post-gate: {summarize(reasons, 2)}"
        if proof.failures:
            listing = summarize([f"{h}: {r[0]}" for h, r in proof.failures.items()], 2)
            why = (f"{len(proof.failures)} of {len(broken)} host(s) whose apply failed do not prove the "
                   f"after-baseline: {listing}")
        else:
            why = f"{len(broken)} host(s) whose apply failed prove the after-baseline; they stay failed all the same"
        self.log.record("POST_GATE", why, step=sid, wave=w.name, hosts=broken, evidence=proof.evidence)
        self._say(f"  post-gate (apply failed): {why}")

    def _soak(self, w: Wave) -> None:
        sid = f"w{w.index}.soak"
        hosts = self.state.hosts_in(st.PASSED, wave=w.index)
        soak = self.plan.soak
        assert soak is not None and w.soak_s is not None
        self.state.begin(sid, hosts=hosts, duration_s=w.soak_s)
        if not hosts:
            self.state.finish(sid, failed={})
            return
        self._say(f"  soak: {w.soak_s}s on {len(hosts)} host(s), watching {', '.join(soak.checks)}")
        result = run_soak(hosts, self.ctx.after, self.ctx.soak_checks, self.ctx.collect, self._wave_dir(w, "soak"),
                          duration_s=w.soak_s, interval_s=soak.interval_s, groups=dict(self.ctx.groups),
                          fail_on=self.plan.gates.fail_on, formats=self.plan.reports, run_id=self.state.run_id,
                          clock=self.ctx.clock, should_stop=self.should_stop)
        if result.stopped:
            raise Stopped()
        for h, why in result.failed.items():
            self.state.set_hosts([h], st.FAILED, reason=f"soak: {why}")
        why = (f"counters flat on {len(result.passed)} of {len(hosts)} host(s) over {w.soak_s}s "
               f"({result.attempts} read(s))" + (f"; grew: {_listing(result.failed)}"
                                                 if result.failed else ""))
        self.log.record("SOAK", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence)
        self.state.finish(sid, failed=result.failed, evidence=list(result.evidence))
        self._say(f"  soak: {why}")

    def _decide(self, w: Wave) -> int | None:
        p = f"w{w.index}"
        sid = f"{p}.decide"
        failed = {h: d["reason"] for h in w.hosts for d in [self.state.hosts[h]]
                  if d["state"] in (st.EXCLUDED, st.APPLY_FAILED, st.FAILED, st.HOST_ROLLED_BACK,
                                    st.HOST_ROLLBACK_FAILED, st.ROLLING_BACK)}
        verdict = judge(failed, len(w.hosts), w.budget)
        evidence = [e for s in ("post_gate", "soak") for e in (self.state.step(f"{p}.{s}") or {}).get("evidence", [])]
        policy = self.plan.on_failure
        if not self.state.step_done(sid):
            self.state.begin(sid)
            if verdict.proceed:
                decision, why = PROCEED, verdict.why + (" -> next wave" if w.index + 1 < len(self.state.data["waves"])
                                                        else " -> rollout complete")
            elif policy == "halt":
                decision, why = HALT, verdict.why + "; policy halt: hosts stay as they are for an operator"
            else:
                decision, why = ROLLBACK, verdict.why + f"; policy {policy}"
            self.log.record(decision, why, step=sid, wave=w.name, hosts=failed, evidence=evidence)
            self.state.finish(sid, decision=decision, why=why, failed=failed)
            self._say(f"  decision: {decision}: {why}")
        decision = self.state.step(sid)["decision"]
        if decision == HALT:
            return self._halt(w, self.state.step(sid)["why"])
        if decision == ROLLBACK:
            waves = self.state.waves[: w.index + 1] if policy == "rollback_all" else [w]
            self._start_rollback(waves, reason=f"{w.name} failed its proof ({policy})", then="stop",
                                 limit_hosts=None)
            code = self._rollback_phase()
            assert code is not None
            return code
        # PROCEED: roll back what failed within the budget (unless halting is the policy), then undrain the rest.
        changed_failed = [h for h in failed if self.state.hosts[h]["state"] in (st.APPLY_FAILED, st.FAILED)]
        if changed_failed and policy != "halt" and not self.state.step_done(f"{p}.failed_rollback"):
            self.state.begin(f"{p}.failed_rollback")
            self._start_rollback([w], reason=f"{len(changed_failed)} host(s) of {w.name} failed within the budget",
                                 then="continue", limit_hosts=changed_failed, done_step=f"{p}.failed_rollback")
            self._rollback_phase()
        if self.plan.drain and self.plan.drain.enabled and not self.state.step_done(f"{p}.undrain"):
            self._undrain(f"{p}.undrain", w, self.state.hosts_in(st.PASSED, wave=w.index))
        self.state.begin(f"{p}.done")
        self.state.finish(f"{p}.done")
        return None

    def _undrain(self, sid: str, w: Wave, hosts: Sequence[str]) -> None:
        drain = self.plan.drain
        assert drain is not None
        hosts = [h for h in hosts if self.state.hosts[h].get("drained")]
        res = self._scheduler_step(sid, w, hosts, drain.undrain)
        if res is None:
            return
        for h in res.ok:
            self.state.hosts[h]["drained"] = False
        self.log.record("UNDRAIN", f"{drain.scheduler}: {len(res.ok)} of {len(hosts)} proven host(s) back in service"
                        + (f"; still drained: {_listing(res.failed)}"
                           if res.failed else ""), step=sid, wave=w.name, hosts=hosts, evidence=[res.artifacts])
        self.state.finish(sid, failed=res.failed, artifacts=res.artifacts)
        self._say(f"  undrain: {len(res.ok)} of {len(hosts)} back in service")

    def _halt(self, w: Wave, why: str) -> int:
        self.state.set_status(st.HALTED)
        self.state.data["halted_wave"] = w.index
        self.state.save()
        self._say(f"halted at {w.name}: {why}")
        return ExitCode.CHECK_FAILED

    # ---------------------------------------------------------------------------------- rollback
    def _start_rollback(self, waves: Sequence[Wave], *, reason: str, then: str,
                        limit_hosts: Sequence[str] | None, done_step: str | None = None) -> None:
        """Record which hosts of which waves are put back (reverse wave order) before anything is touched."""
        prev = self.state.data.get("rollback") or {}
        rb_id = int(prev.get("id", 0)) + 1
        plan: list[dict[str, Any]] = []
        for w in sorted(waves, key=lambda x: -x.index):
            hosts = [h for h in w.hosts if self.state.hosts[h]["state"] in st.CHANGED
                     and (limit_hosts is None or h in limit_hosts)]
            if hosts:
                plan.append({"wave": w.index, "hosts": hosts})
        self.state.data["rollback"] = {"id": rb_id, "reason": reason, "then": then, "waves": plan,
                                       "started_at": utc_now(), "done_step": done_step}
        self.state.data["phase"] = "rollback"
        self.state.save()
        self.log.record("ROLLBACK_START", f"{reason}: putting back {sum(len(x['hosts']) for x in plan)} host(s) in "
                        f"reverse wave order, then proving the before-baseline",
                        step=f"rb{rb_id}", hosts=[h for x in plan for h in x["hosts"]])

    def _rollback_phase(self) -> int | None:
        """Run (or resume) the recorded rollback. Returns an exit code when the run stops here, None to go on."""
        rb = self.state.data["rollback"]
        n = rb["id"]
        waves = {w.index: w for w in self.state.waves}
        for item in rb["waves"]:
            w = waves[item["wave"]]
            hosts = item["hosts"]
            p = f"rb{n}.w{w.index}"
            self._check_stop()
            if self.plan.drain and self.plan.drain.enabled and not self.state.step_done(f"{p}.drain"):
                self._drain(f"{p}.drain", w, hosts)
            for j, chunk in enumerate(_chunks(hosts, _batch_size(w))):
                sid = f"{p}.apply.b{j}"
                if not self.state.step_done(sid):
                    todo = [h for h in chunk if self.state.hosts[h]["state"] != st.HOST_ROLLED_BACK
                            and (self.state.hosts[h].get("rollback") or {}).get("skipped") != n]
                    self._apply_batch(sid, w, todo, self.plan.rollback.path, self.plan.rollback.vars, "rollback",
                                      self.ctx.before, rollback_state=(st.ROLLING_BACK, st.ROLLING_BACK,
                                                                       st.HOST_ROLLBACK_FAILED))
                self._check_stop()
            if not self.state.step_done(f"{p}.gate"):
                self._rollback_gate(f"{p}.gate", w, hosts, n)
            self._check_stop()
            if self.plan.drain and self.plan.drain.enabled and not self.state.step_done(f"{p}.undrain"):
                self._undrain(f"{p}.undrain", w, self.state.hosts_in(st.HOST_ROLLED_BACK, wave=w.index))
        all_hosts = [h for item in rb["waves"] for h in item["hosts"]]
        bad = [h for h in all_hosts if self.state.hosts[h]["state"] != st.HOST_ROLLED_BACK]
        proven = [h for h in all_hosts if h not in bad]
        self.state.data["phase"] = "rollout"
        rb["ended_at"] = utc_now()
        if rb.get("done_step"):
            self.state.finish(rb["done_step"])
        if bad:
            why = (f"{len(bad)} host(s) do not prove the before-baseline after the rollback and stay drained for an "
                   f"operator: {summarize([h + ': ' + self.state.hosts[h]['reason'] for h in bad], 2)}")
            self.log.record("ROLLBACK_FAILED", why, step=f"rb{n}", hosts=bad)
            self._say(f"rollback incomplete: {why}")
            if rb["then"] == "continue":  # the rollout goes on; the run ends waiting for an operator
                self.state.save()
                return None
            self.state.set_status(st.ROLLBACK_FAILED)
            self.state.save()
            return ExitCode.HALTED
        why = f"{len(proven)} host(s) put back and proven on the before-baseline"
        self.log.record("ROLLBACK_DONE", why, step=f"rb{n}", hosts=proven,
                        evidence=[e for item in rb["waves"] for e in
                                  (self.state.step(f"rb{n}.w{item['wave']}.gate") or {}).get("evidence", [])])
        self._say(f"rolled back: {why}")
        if rb["then"] == "continue":
            self.state.save()
            return None
        self.state.set_status(st.ROLLED_BACK)
        self.state.save()
        return ExitCode.ROLLED_BACK

    def _rollback_gate(self, sid: str, w: Wave, hosts: Sequence[str], n: int) -> None:
        todo = [h for h in hosts if self.state.hosts[h]["state"] == st.ROLLING_BACK]
        self.state.begin(sid, hosts=todo)
        if not todo:
            self.state.finish(sid, failed={})
            return
        result = self._gate("rollback gate", todo, self.ctx.before,
                            self._evidence_dir(f"rollback-{n}", f"{w.index + 1}-{w.name}", "gate"),
                            timeout_s=self.plan.gates.timeout_s)
        self._settle("rollback gate", result, st.HOST_ROLLED_BACK, st.HOST_ROLLBACK_FAILED,
                     passed_reason="rolled back and proven on the before-baseline")
        why = (f"{len(result.passed)} of {len(todo)} host(s) proven on the before-baseline after the rollback"
               + (f"; not proven: {_listing(result.failed)}"
                  if result.failed else ""))
        self.log.record("ROLLBACK_GATE", why, step=sid, wave=w.name, hosts=todo, evidence=result.evidence)
        self.state.finish(sid, failed=result.failed, attempts=result.attempts, evidence=list(result.evidence))
        self._say(f"  rollback gate: {why}")


def _listing(failed: Mapping[str, str], limit: int = 2) -> str:
    """'h1: reason; h2: reason (+3 more)' for decision texts."""
    return summarize([f"{h}: {r}" for h, r in failed.items()], limit)


def _batch_size(w: Wave) -> int:
    return max(1, max((len(b) for b in w.batches), default=1))


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def start_rollback(executor: Executor, hosts: Sequence[str] | None, reason: str) -> None:
    """For `fabricproof rollback RUN`: every wave, newest first, limited to hosts (None: all changed hosts)."""
    executor._start_rollback(executor.state.waves, reason=reason, then="stop", limit_hosts=hosts)


def snapshot_inputs(run_dir: Path, plan: Plan) -> dict[str, str]:
    """Copy the plan and its baselines into the run directory: the evidence says what the run was judged against."""
    inputs = run_dir / "inputs"
    inputs.mkdir(mode=0o700, exist_ok=True)
    copies = {"plan": plan.source, "before": plan.before, "after": plan.after}
    out = {}
    for name, src in copies.items():
        dst = inputs / f"{name}{Path(src).suffix or '.yaml'}"
        shutil.copyfile(src, dst)
        dst.chmod(0o600)
        out[name] = str(dst)
    return out
