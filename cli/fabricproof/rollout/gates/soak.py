"""The soak gate: after a wave's post-gate, error counters snapshotted and re-read over the wave's soak; a host whose
counters grew beyond a check's budget fails (the catalog's counter-delta checks, rollout.soak runs it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import Problem
from ...timeutil import parse_duration
from .. import state as st
from .. import store
from ..soak import run_soak
from ..stepid import StepId
from ..steps import Stopped, listing
from .base import NAMES, SAMPLES, SETTLE, Block, GateKind, StepForm, catalog_matches

if TYPE_CHECKING:
    from ..plan import Wave
    from ..steps import RunSteps

SOAK = "soak"
DEFAULT_SOAK_CHECKS = ("nvlink.crc_errors", "nvlink.replay_errors", "nvlink.recovery_errors", "ib.symbol_errors",
                       "ib.link_downed")


@dataclass(frozen=True)
class Soak:
    duration_s: int
    interval_s: int | None
    checks: tuple[str, ...]


class SoakGate(GateKind):
    name = "soak"
    spec_schema = {
        "type": "object", "additionalProperties": False, "required": ["duration"],
        "description": "After a wave passes its post-gate: counters are snapshotted, then re-read every interval until "
                       "duration has passed; any growth beyond a check's budget fails the host.",
        "properties": {
            "duration": {"$ref": "#/$defs/duration"},
            "interval": {"$ref": "#/$defs/duration", "description": "Re-read counters this often to stop early "
                                                                    "(default: once, at the end)."},
            "checks": {**NAMES, "description": "Counter-delta checks (op delta_le) that must hold over the soak. "
                                               f"Default: {', '.join(DEFAULT_SOAK_CHECKS)}."}}}
    steps = {SOAK: StepForm("soak", SAMPLES)}
    after_stage, after_step = SETTLE, SOAK

    def parse(self, block: Block, problems: list[Problem]) -> Soak | None:
        """spec.soak: its duration (each wave may set its own), re-read interval and counter-delta checks."""
        if "soak" not in block.spec:
            return None
        s = block.spec["soak"]
        soak_checks = tuple(s.get("checks") or DEFAULT_SOAK_CHECKS)
        for i, pat in enumerate(soak_checks):
            where = ("spec", "soak", "checks", i) if s.get("checks") else ("spec", "soak")
            hits = catalog_matches(pat, block.catalog)
            if not hits:
                problems.append(block.problem(where, f"{pat!r} matches no check id or family"))
            for c in hits:
                if c.op != "delta_le":
                    problems.append(block.problem(where, f"soak check {c.id} compares one snapshot ({c.op}); a soak "
                                                         "needs counter-delta checks (op delta_le)"))
        interval = parse_duration(s["interval"]) if "interval" in s else None
        if interval == 0:
            problems.append(block.problem(("spec", "soak", "interval"), "interval must be at least 1s"))
        return Soak(parse_duration(s["duration"]), interval, soak_checks)

    def applies(self, spec: Any, w: Wave) -> bool:
        return w.soak_s is not None

    def after(self, run: RunSteps, w: Wave, spec: Any) -> None:
        sid = StepId(w.index, SOAK)
        hosts = run.state.hosts_in(st.PASSED, wave=w.index)
        assert w.soak_s is not None
        run.state.begin(sid, hosts=hosts, duration_s=w.soak_s)
        if not hosts:
            run.state.finish(sid, failed={}, ran=False)
            return
        run.say(f"  soak: {w.soak_s}s on {len(hosts)} host(s), watching {', '.join(spec.checks)}")
        result = run_soak(hosts, run.ctx.after, run.ctx.soak_checks, run.ctx.collect,
                          store.fresh_dir(run.wave_dir(w, store.SOAK_DIR)), duration_s=w.soak_s,
                          interval_s=spec.interval_s, groups=dict(run.ctx.groups), fail_on=run.plan.gates.fail_on,
                          formats=run.plan.reports, run_id=run.state.run_id, clock=run.ctx.clock,
                          should_stop=run.should_stop)
        if result.stopped:
            raise Stopped()
        for h, why in result.failed.items():
            run.state.set_hosts([h], st.FAILED, reason=f"soak: {why}")
        why = (f"counters flat on {len(result.passed)} of {len(hosts)} host(s) over {w.soak_s}s "
               f"({result.attempts} read(s))" + (f"; grew: {listing(result.failed)}"
                                                 if result.failed else ""))
        run.log.record("SOAK", why, step=sid, wave=w.name, hosts=result.failed, evidence=result.evidence,
                       actions=result.actions)
        run.state.finish(sid, failed=result.failed, evidence=list(result.evidence), actions=result.actions)
        run.say(f"  soak: {why}")


GATE = SoakGate()
