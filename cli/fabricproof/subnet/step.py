"""The fabric step of a run: the vantage chosen, the fabric read from it once, diffed against the cabling plan, and
each host's `/subnet` facts (with the fabric collectors' records, so the subnet.* checks cite the evidence)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..collect.fabric import COUNTERS, COUNTERS_AFTER, FabricRun, collect_fabric
from ..model import Host
from ..runstore import RunStore
from . import hosts as hosts_mod
from .diff import Diff, Finding, diff
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
          judged: Sequence[str], via: str = "ssh", options: Any = None, window_s: float, run_id: str = "",
          collectors: Mapping[str, Any] | None = None) -> FabricProof:
    """Read the fabric from the vantage among `inventory_hosts` (its choice may rest on the collected `facts`) into
    RUNDIR/fabric, and diff it against `plan` for the `judged` hosts (the findings name them; each host's rail map
    comes from its facts)."""
    vantage = hosts_mod.choose(inventory_hosts, facts)
    if vantage.host is None:
        return FabricProof(vantage, None, None, vantage.why)
    run = collect_fabric(vantage.host, run_dir, via=via, options=options, window_s=window_s, run_id=run_id,
                         collectors=collectors)
    if run.subnet is None:
        return FabricProof(vantage, run, None, run.error or run.errors.get("ibnetdiscover")
                           or "the vantage host showed no fabric")
    rails = {h: hosts_mod.rails(facts.get(h)) for h in judged}
    found = diff(plan, run.subnet, hosts=list(judged), rails=rails, counters_before=run.counters_before)
    store = RunStore(RunStore(run_dir).fabric_root)
    doc = store.fabric() or {}
    doc["findings"] = [dataclasses.asdict(f) for f in found.findings]
    store.write_fabric(doc)
    return FabricProof(vantage, run, found)


def records(proof: FabricProof, collector_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The fabric collectors' records every judged host's facts carry: ok with the evidence, or the error that
    leaves the subnet.* checks reading them unjudged."""
    out: dict[str, dict[str, Any]] = {}
    run = proof.run
    for cid in collector_ids:
        if run is None:
            out[cid] = {"status": "error", "error": proof.error}
            continue
        name = COUNTERS_AFTER if cid == COUNTERS and COUNTERS_AFTER in run.results else cid
        result = run.results.get(name)
        why = run.errors.get(cid) or (proof.error if proof.diff is None else "")
        rec: dict[str, Any] = {"status": "error" if why else "ok"}
        if why:
            rec["error"] = why
        if result is not None:
            rec.update(exit_code=result.exit_code, command=" ".join(result.argv),
                       duration_s=round(result.duration_s, 3))
        if name in run.evidence:
            rec["evidence"] = run.evidence[name]
        out[cid] = rec
    return out


def merged(facts: Mapping[str, dict[str, Any]], proof: FabricProof, collector_ids: Sequence[str]
           ) -> dict[str, dict[str, Any]]:
    """Each collected host's facts with its `/subnet` fragment and the fabric collectors' records in them."""
    fragments = proof.diff.host_facts() if proof.diff is not None else {}
    recs = records(proof, collector_ids)
    out: dict[str, dict[str, Any]] = {}
    for host, doc in facts.items():
        doc.setdefault("collectors", {}).update({cid: dict(r) for cid, r in recs.items()})
        if host in fragments:
            doc["subnet"] = fragments[host]
        out[host] = doc
    return out
