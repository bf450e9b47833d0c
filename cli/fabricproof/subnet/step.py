"""The fabric step of a run: the vantage chosen, the fabric read from it once, diffed against the cabling plan, and
each host's `/subnet` facts (with the fabric collectors' records, so the subnet.* checks cite the evidence)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..collect.fabric import TOPOLOGY, FabricRun, collect_fabric
from ..model import Host
from ..runstore import RunStore
from . import hosts as hosts_mod
from .checks import COLLECTOR
from .diff import Diff, Finding, diff, merge_facts
from .plan import Plan


@dataclass(frozen=True)
class FabricProof:
    """What the fabric step found: the vantage, its reading of the fabric (None: no vantage), and the diff (None: no
    fabric to diff). `error` says why there is no diff."""

    vantage: hosts_mod.Vantage
    run: FabricRun | None
    diff: Diff | None
    error: str = ""

    @property
    def findings(self) -> list[Finding]:
        return list(self.diff.findings) if self.diff is not None else []


def prove(plan: Plan, inventory_hosts: Sequence[Host], facts: Mapping[str, Mapping[str, Any]], run_dir: Path, *,
          via: str = "ssh", options: Any = None, window_s: float, run_id: str = "", registry: Any = None) -> FabricProof:
    """Read the fabric from the vantage among `inventory_hosts` (its choice may rest on the collected `facts`) into
    RUNDIR/fabric, and diff it against `plan`. Every inventory host is named in the diff, collected or not, so a
    finding names the hosts it affects even when only some were collected (a wave, a --limit); each collected
    host's rail map comes from its facts."""
    vantage = hosts_mod.choose(inventory_hosts, facts)
    if vantage.host is None:
        return FabricProof(vantage, None, None, vantage.why)
    run = collect_fabric(vantage.host, run_dir, via=via, options=options, window_s=window_s, run_id=run_id,
                         registry=registry)
    if run.subnet is None:
        return FabricProof(vantage, run, None, run.error or run.errors.get(TOPOLOGY)
                           or "the vantage host showed no fabric")
    rails = {h: hosts_mod.rails(doc) for h, doc in facts.items()}
    found = diff(plan, run.subnet, hosts=[h.name for h in inventory_hosts], rails=rails,
                 counters_before=run.counters_before)
    store = RunStore(RunStore(run_dir).fabric_root)
    doc = store.fabric() or {}
    doc["findings"] = [dataclasses.asdict(f) for f in found.findings]
    store.write_fabric(doc)
    return FabricProof(vantage, run, found)


def view(proof: FabricProof) -> dict[str, Any] | None:
    """What the HTML report draws of the fabric (Report.fabric): the fabric, the findings, the switches' roles from
    the plan; None when the fabric was not judged."""
    if proof.diff is None or proof.run is None or proof.run.subnet is None:
        return None
    plan = proof.diff.plan
    return {"subnet": proof.run.subnet, "findings": proof.findings, "roles": plan.roles(), "plan": plan}


def record(proof: FabricProof) -> dict[str, Any]:
    """The `subnet` collector's record every judged host's facts carry: ok, citing the topology the diff read, or an
    error saying why the fabric was not judged (any fabric tool that failed: a counter reading lost would pass
    subnet.switch_errors unseen), which leaves the subnet.* checks unjudged rather than passed."""
    run = proof.run
    if proof.diff is None or run is None or run.errors:
        why = "; ".join(run.errors.values()) if run is not None and run.errors else proof.error
        return {"status": "error", "error": why or "the fabric was not read"}
    rec: dict[str, Any] = {"status": "ok"}
    topology = run.results.get(TOPOLOGY)
    if topology is not None:
        rec.update(exit_code=topology.exit_code, command=" ".join(topology.argv),
                   duration_s=round(topology.duration_s, 3))
    if TOPOLOGY in run.evidence:
        rec["evidence"] = run.evidence[TOPOLOGY]
    return rec


def merged(facts: Mapping[str, dict[str, Any]], proof: FabricProof) -> dict[str, dict[str, Any]]:
    """Each collected host's facts with its `/subnet` fragment and the `subnet` record in them."""
    fragments = proof.diff.host_facts() if proof.diff is not None else {}
    rec = record(proof)
    out: dict[str, dict[str, Any]] = {}
    for host, doc in facts.items():
        if host in fragments:
            merge_facts(doc, fragments[host])
        doc.setdefault("collectors", {})[COLLECTOR] = dict(rec)
        out[host] = doc
    return out
