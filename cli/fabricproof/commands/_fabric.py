"""What `validate --fabric-plan` and the `fabric` commands share on the terminal: the fabric options (Typer), the
fabric step after a collection (vantage, the fabric read once, diffed against the plan, `/subnet` merged into every
host's facts) and the lines saying what it found."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..collect import CollectResult
from ..collect.fabric import DEFAULT_WINDOW_S
from ..errors import InputError
from ..judging.pipeline import Added
from ..model import Host
from ._common import err_console, shown

if TYPE_CHECKING:  # the fabric's modules load only when a command reads a fabric
    from ..subnet import step
    from ..subnet.plan import Plan

FabricPlanOpt = Annotated[str | None, typer.Option(
    "--fabric-plan", help="A cabling plan (kind: FabricPlan): the fabric is read once from the vantage host and each "
    "cable compared with it; the subnet.* checks judge every host on the result.")]
FabricWindowOpt = Annotated[float, typer.Option(
    "--fabric-window", help="Seconds between the two readings of the switch-port error counters (their growth is "
    "subnet.switch_errors); 0 reads them once.")]


def load(plan_file: str, window_s: float, groups: Mapping[str, Sequence[str]] | None) -> Plan:
    """The cabling plan and the window, checked before any host is touched (exit 2 with file, line and path); the
    inventory's groups serve a rails rule that names one."""
    if not 0 <= window_s <= 3600:
        raise InputError(f"--fabric-window {window_s:g}: give seconds from 0 to 3600")
    from ..subnet.plan import load_plan

    return load_plan(plan_file, groups=groups)


def lines(proof: step.FabricProof, limit: int = 20) -> list[str]:
    """What the fabric step did, for stderr: the vantage and why, what failed, the findings (the first `limit`)."""
    if proof.vantage.host is None:
        return [f"fabric: {proof.error}"]
    out = [f"fabric: read from {proof.vantage.host.name} ({proof.vantage.why})"]
    run = proof.run
    if run is not None and run.subnet is not None:
        s = run.subnet
        cas = {n.guid for n in s.cas()}
        down = sum(1 for p in s.idle_ports if p.end.guid in cas)
        out[0] += (f": {sum(1 for _ in s.switches())} switches, {len(cas)} CAs, {len(s.links)} cables up"
                   + (f", {down} HCA port(s) down" if down else ""))
    for cid, why in (run.errors.items() if run is not None else ()):
        out.append(f"fabric: {cid}: {why}")
    if proof.diff is None:
        out.append(f"fabric: not compared with the plan: {proof.error}")
        return out
    found = proof.findings
    out.append(f"fabric: {len(found)} finding(s) against the plan" if found else "fabric: every cable as planned")
    out.extend(f"  {f.check}: {f.sentence}" for f in found[:limit])
    if len(found) > limit:
        out.append(f"  ... and {len(found) - limit} more (fabric/fabric.json in the run directory)")
    return out


def show(proof: step.FabricProof) -> None:
    for line in lines(proof):
        err_console.print(shown(line), soft_wrap=True, highlight=False)


def after_collection(plan: Plan, inventory_hosts: Sequence[Host], via: str, options: Any, window_s: float,
                     quiet: bool, run_id: str = ""
                     ) -> Callable[[CollectResult], Added]:
    """The fabric as the pipeline's step after a collection: read from the vantage (declared, or the first collected
    host with an Active InfiniBand port), diffed against the plan, and every collected host's facts given its
    `/subnet` fragment and the fabric collectors' records. A fabric that cannot be read leaves the subnet.* checks
    in error on every host, with why; the rest of the run is judged as usual."""

    from ..subnet import step

    def then(result: CollectResult) -> Added:
        if not result.facts_by_host:
            return Added(result.facts_by_host)
        proof = step.prove(plan, inventory_hosts, result.facts_by_host, result.run_dir, via=via, options=options,
                           window_s=window_s, run_id=run_id or result.run_id)
        if not quiet:
            show(proof)
        drawn = step.view(proof)
        return Added(step.merged(result.facts_by_host, proof),
                     finish=lambda report: dataclasses.replace(report, fabric=drawn))

    return then


def chained(first: Callable[[CollectResult], Added] | None, second: Callable[[CollectResult], Added] | None
            ) -> Callable[[CollectResult], Added] | None:
    """Two steps after one collection (the probes, then the fabric): the second sees the first's facts."""
    if first is None or second is None:
        return first or second

    def then(result: CollectResult) -> Added:
        a = first(result)
        b = second(dataclasses.replace(result, facts_by_host=a.facts))
        return Added(b.facts, {**a.errors, **b.errors}, lambda report: b.finish(a.finish(report)))

    return then
