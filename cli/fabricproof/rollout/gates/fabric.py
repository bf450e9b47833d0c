"""The fabric gate: inside the post-gate, the InfiniBand fabric is read once from the vantage host and diffed against
the cabling plan; a wave's host fails when a finding touches its cables or its leaf's (a missing uplink of its leaf),
or when the fabric could not be read (unproven)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import Problem
from ...timeutil import parse_duration
from .. import state as st
from .. import store
from ..gate import summarize
from ..steps import listing
from .base import JOIN, Block, GateKind, Reach

if TYPE_CHECKING:
    from ..plan import Wave
    from ..steps import RunSteps

#: How long between the two switch-counter readings when the block does not say (the post-gate retries anyway).
DEFAULT_WINDOW_S = 5.0


@dataclass(frozen=True)
class FabricSpec:
    """The gate's settings: the cabling plan's file (loaded with the inventory's groups, before any wave) and the
    counter window."""

    plan_file: Path
    window_s: float = DEFAULT_WINDOW_S


@dataclass(frozen=True)
class FabricOutcome:
    """What one reading of the fabric says of some hosts: who fails and why, and a line for the decision."""

    failed: dict[str, str]
    summary: str


def verdict(hosts: Sequence[str], findings: Iterable[Any], error: str = "",
            not_collected: Mapping[str, str] | None = None) -> FabricOutcome:
    """Each host's verdict from the diff's findings (each names the hosts it affects), pure. No diff (`error`):
    every host is unproven and fails with why; a host whose own facts were not collected fails too (no rail map)."""
    if error:
        return FabricOutcome({h: f"fabric gate: {error}" for h in hosts}, f"the fabric was not judged: {error}")
    wave = set(hosts)
    reasons: dict[str, list[str]] = {}
    found = list(findings)
    for f in found:
        for h in f.hosts:
            if h in wave:
                reasons.setdefault(h, []).append(f"{f.check}: {f.sentence}")
    for h, why in (not_collected or {}).items():
        if h in wave:
            reasons.setdefault(h, []).append(f"not collected: {why}")
    failed = {h: "fabric gate: " + summarize(r, 2) for h, r in sorted(reasons.items())}
    return FabricOutcome(failed, f"{len(hosts) - len(failed)} of {len(hosts)} host(s) cabled as planned"
                                 + (f" ({len(found)} finding(s) in the fabric)" if found else ""))


class FabricGate(GateKind):
    name = "fabric"
    schema = {"fabric": {
        "type": "object", "additionalProperties": False, "required": ["plan"],
        "description": "The cabling is as planned: inside the post-gate the InfiniBand fabric is read once from the "
                       "vantage host (host var fabricproof_fabric_vantage, group fabric_vantage, else the first host "
                       "with an Active InfiniBand port) and diffed against the plan; a wave's host fails when a "
                       "subnet.* finding touches its cables or its leaf's, or when the fabric cannot be read.",
        "properties": {
            "plan": {"type": "string", "minLength": 1,
                     "description": "The cabling plan (kind: FabricPlan), relative to this file."},
            "window": {"$ref": "#/$defs/duration",
                       "description": "Between the two readings of the switch-port error counters (default 5s)."}}}}
    after_stage = JOIN

    def parse(self, block: Block, problems: list[Problem]) -> FabricSpec | None:
        """The plan's file, relative to the rollout plan; None: the plan has no fabric gate. The cabling plan itself
        is read when the run starts, with the inventory's groups (a rails rule may name one), before any wave."""
        spec = block.spec["gates"].get("fabric")
        if not spec:
            return None
        path = Path(spec["plan"])
        if not path.is_absolute():
            path = Path(block.doc.file).resolve().parent / path
        if not path.is_file():
            problems.append(block.problem(("spec", "gates", "fabric", "plan"), f"cabling plan {spec['plan']!r} not "
                                          f"found ({path})"))
            return None
        return FabricSpec(path, parse_duration(spec.get("window", DEFAULT_WINDOW_S)))


    def live(self, reach: Reach, spec: FabricSpec) -> Callable[[Sequence[str], Path], FabricOutcome]:
        """The fabric over a remote transport: each proof reads the hosts' ports (the vantage when none is declared,
        each host's rail map), then the fabric once from the vantage, into the proof's evidence directory; hosts ->
        FabricOutcome. The cabling plan is loaded here, so a bad one is exit 2 before any wave."""
        from ... import transport
        from ...collect import collect as collect_fleet
        from ...collectors import COLLECTORS
        from ...subnet.plan import load_plan
        from ...subnet.step import prove

        inventory, via = reach.inventory, reach.via
        options = transport.configure(via, inventory_path=reach.inventory_path)
        plan = load_plan(spec.plan_file, groups=inventory.groups)

        def fabric(hosts: Sequence[str], evidence_dir: Path) -> FabricOutcome:
            run_id = f"fabric-{evidence_dir.parent.name}-{evidence_dir.name}"
            res = collect_fleet([inventory.hosts[h] for h in hosts], evidence_dir, via=via, options=options,
                                collectors=[COLLECTORS["ibstat"]], forks=reach.forks, inventory=reach.inventory_path,
                                run_id=run_id)
            proof = prove(plan, list(inventory.hosts.values()), res.facts_by_host, evidence_dir,
                          via=via, options=options, window_s=spec.window_s, run_id=run_id)
            return verdict(hosts, proof.findings, "" if proof.diff is not None else proof.error, res.collection_errors)

        return fabric
    def describe(self, spec: Any) -> dict[str, Any]:
        return {"fabric_plan": str(spec.plan_file), "fabric_window_s": spec.window_s}

    def join(self, run: RunSteps, w: Wave, spec: Any, sid: Any, hosts: Sequence[str]) -> tuple[dict[str, str], str]:
        """The fabric read and diffed on the hosts the checks proved; those its findings touch fail."""
        evidence = store.fresh_dir(store.gate_dir(run.wave_dir(w, store.POST_GATE_DIR), self.name))
        outcome = run.ctx.seam(self.name)(list(hosts), evidence)
        run.state.set_hosts(list(outcome.failed), st.FAILED)
        for h, why in outcome.failed.items():
            run.state.hosts[h]["reason"] = why
        why = outcome.summary + (f"; failed: {listing(outcome.failed)}" if outcome.failed else "")
        run.log.record("FABRIC_GATE", why, step=sid, wave=w.name, hosts=outcome.failed, evidence=[evidence])
        run.say(f"  post-gate fabric: {why}")
        return outcome.failed, str(evidence)


GATE = FabricGate()
