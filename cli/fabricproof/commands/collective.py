"""`fabricproof collective run`: a multi-node collective at one scale over inventory hosts, and the search."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from .. import config, transport
from .. import facts as facts_mod
from .. import inventory as inventory_mod
from ..collect import new_run_id, select_hosts
from ..errors import InputError
from ..fsutil import atomic_write_text
from ..judging import baseline as baseline_mod
from ..judging import catalog
from ..judging.pipeline import Delegated, Gathered, Request, run
from ..model import Host, Report
from ..probes import collective, collective_section, isolation
from ..reporters import REPORTERS
from ..runstore import RunStore
from ..transport import RunContext
from ..subnet.plan import Plan, load_plan
from ._common import (BASELINE_HELP, FORMAT_HELP, INVENTORY_DEFAULT, SEVERITIES, check_fail_on, emit_report,
                      err_console, input_errors, pair_outputs, shown)

app = typer.Typer(help="Multi-node collectives (nccl-tests through srun or mpirun) and the search for the host at "
                       "fault.", no_args_is_help=True)

RUN_EPILOG = """\
Examples:

  fabricproof collective run -i inventory.yml -b baseline.yaml --scale all --search -o runs/all

  fabricproof collective run -i inventory.yml -b baseline.yaml --scale leaf --fabric-plan fabric-plan.yaml --search -o runs/leaf

  fabricproof collective run -i inventory.yml -b baseline.yaml --scale domain --facts runs/collected/facts -o runs/nvl

Groups: domain/domain_ib, each NVLink domain (cliques from --facts); leaf, the hosts under each leaf and cross_leaf,
one host of each leaf together (leaves from --fabric-plan); pair, consecutive pairs; all, every host at once.
Writes RUNDIR/facts/<host>.json (/perf/collective), RUNDIR/collective.json (every launch and the search's path),
RUNDIR/probes/collective/ (each launcher's output) and RUNDIR/report.json (its `collective` section: every test's
figure and outcome, the search's rounds and verdict; -f html draws them); judged by perf.collective_busbw and
perf.collective_at_fault. Exit codes as validate's: 0 pass; 1 a check failed; 2 invalid input (nothing launched);
3 a host got no figure (a round refused: a node not idle, the budget spent); 130 interrupted (every step cancelled).
"""

CHECKS = ("perf.collective_busbw", "perf.collective_at_fault")


@app.command("run", epilog=RUN_EPILOG)
@input_errors
def run_collective(
    scale: Annotated[str, typer.Option("--scale", help=f"Groups to run: {', '.join(collective.SCALES)}.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Run directory to create (new or empty).",
                                         show_default=False)],
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Ansible inventory." + INVENTORY_DEFAULT)] = None,
    baseline: Annotated[str | None, typer.Option("--baseline", "-b", help=BASELINE_HELP)] = None,
    limit: Annotated[str | None, typer.Option("--limit", "-l", help="Ansible host pattern, e.g. 'rack1:!gb200-0003'.")] = None,
    search: Annotated[bool, typer.Option("--search", help="When a group is slow or fails, find the host(s), pair or "
                                         "path at fault (needs the scale's threshold in the baseline).")] = False,
    via: Annotated[str | None, typer.Option("--via", help="Launcher: srun or mpirun (default: the baseline's "
                                            "perf.probes.collective.launcher).")] = None,
    fabric_plan: Annotated[Path | None, typer.Option("--fabric-plan", help="Cabling plan (kind: FabricPlan): the "
                                                     "hosts' leaves for --scale leaf and cross_leaf.")] = None,
    facts: Annotated[Path | None, typer.Option("--facts", help="Collected facts (a run's facts/ directory): the "
                                               "NVLink domains for --scale domain and domain_ib.")] = None,
    fmt: Annotated[list[str], typer.Option("--format", "-f", help=FORMAT_HELP.format(choices=", ".join(REPORTERS)))] = [],  # noqa: B006
    fail_on: Annotated[str, typer.Option("--fail-on", help=f"Lowest severity that makes the exit code 1: {SEVERITIES}.")] = "critical",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress per round and group.")] = False,
) -> None:
    """Run one collective per group of a scale, all groups at once, and with --search find what is at fault."""
    # Every input is read and checked before anything is launched.
    inventory, baseline = config.inventory(inventory), config.baseline(baseline)
    check_fail_on(fail_on)
    pairs = pair_outputs(fmt, [])
    if scale not in collective.SCALES:
        raise InputError(f"--scale {scale!r}: one of {', '.join(collective.SCALES)}")
    if via not in (None, "srun", "mpirun"):
        raise InputError(f"--via {via!r}: srun or mpirun")
    base = baseline_mod.load(baseline)
    inv = inventory_mod.load(inventory) if inventory else None
    if inv is None:
        raise InputError("nothing to run: give --inventory")
    hosts = [collective.node_name(h.name) for h in select_hosts(inventory, limit, "ssh", loaded=inv)]
    values = base.for_groups(inv.hosts[hosts[0]].groups)
    plan = load_plan(fabric_plan, groups=inv.groups) if fabric_plan else None
    leaves = collective.leaves(plan, hosts) if plan is not None else None
    if scale in ("leaf", "cross_leaf") and not leaves:
        raise InputError(f"--scale {scale} groups hosts by leaf: give --fabric-plan PLAN (it cables none of the hosts)"
                         if fabric_plan else f"--scale {scale} groups hosts by leaf: give --fabric-plan PLAN")
    if scale in ("domain", "domain_ib") and facts is None:
        raise InputError(f"--scale {scale} groups hosts by NVLink domain: give --facts DIR (collected facts)")
    known = facts_mod.load_dir(facts) if facts is not None else None
    groups = collective.groups(scale, hosts, known, leaves)
    if not groups:
        raise InputError(f"--scale {scale}: no group of two or more of the {len(hosts)} host(s)")
    settings = collective.search_settings(values, scale) if search else None
    checks = [c for c in catalog.load() if c.id in CHECKS]
    store = RunStore.create(output)
    store.begin()

    run_id = new_run_id()
    tell = (lambda _line: None) if quiet else (lambda line: err_console.print(shown(line), highlight=False))
    # The probes' idle guard over SSH on every host of each round, besides Slurm's own view of the nodes.
    link, _fleet = transport.open_fleet("ssh", transport.configure("ssh", inventory_path=inventory),
                                        RunContext(run_dir=store.root, run_id=run_id, forks=16, host_timeout_s=600.0))
    launches = collective.Collective(values, scale, store.collective_dir, launcher=via, progress=tell,
                                     idle=collective.idle_guard(link, inv.hosts))
    group_of = dict(inv.groups_of())
    outcome: dict[str, Any] = {}

    def collect(_hosts: list[str], _evidence: Path) -> Gathered:
        verdict = None
        try:
            if settings is not None:
                verdict = isolation.search([h for g in groups for h in g], launches, settings, groups=groups,
                                           leaves=leaves)
            else:
                launches(groups)
        except collective.Stopped as exc:
            outcome["stopped"] = str(exc)
        outcome["verdict"] = verdict
        docs = collective.facts_documents(launches, verdict, group_of)
        for host, doc in docs.items():
            store.write_facts(host, doc)
        store.sync()
        why = outcome.get("stopped", "in no group of this scale")
        return Gathered(docs, {h: why for h in _hosts if h not in docs})

    def finish(report: Report) -> Report:
        return replace(report, collective=collective_section.section(launches, outcome.get("verdict"),
                                                                     outcome.get("stopped")))

    try:
        judged = run(Request(Delegated(hosts, store.root, collect, finish), base, checks, groups=group_of,
                             reports=("json",), run_id=run_id))
    finally:
        link.close()
    verdict = outcome.get("verdict")
    searched = None if verdict is None else verdict.to_facts()
    if searched is not None and searched["findings"] and plan is not None:
        searched = _with_fabric(searched, plan, inventory, [inv.hosts[h] for h in hosts], store.root, run_id, quiet)
    atomic_write_text(store.collective_path, json.dumps({
        **launches.to_facts(), "stopped": outcome.get("stopped"), "search": searched}, indent=1) + "\n")
    if verdict is not None and not quiet:
        found = "; ".join(f"{f.kind} {', '.join(f.members)}" for f in verdict.findings) or "nothing"
        err_console.print(shown(f"search: {verdict.state} in {verdict.rounds} round(s), {verdict.tests} test(s): "
                                f"{found}"), highlight=False)
    err_console.print(f"evidence and report: {store.root}", highlight=False)
    emit_report(judged.report, pairs, judged.written)
    raise typer.Exit(judged.exit_code(fail_on))


def _with_fabric(searched: dict[str, Any], plan: Plan, inventory: str, inventory_hosts: list[Host], run_dir: Path,
                 run_id: str, quiet: bool) -> dict[str, Any]:
    """The search's findings with the fabric's diff against the plan as evidence: the fabric read once from the
    vantage (RUNDIR/fabric/), as `fabric diff` reads it."""
    from ..subnet import step
    from . import _fabric

    proof = step.prove(plan, inventory_hosts, {}, run_dir, via="ssh",
                       options=transport.configure("ssh", inventory_path=inventory), window_s=0, run_id=run_id)
    if not quiet:
        for line in _fabric.lines(proof):
            err_console.print(shown(line), soft_wrap=True, highlight=False)
    return collective.with_fabric(searched, proof.findings, proof.error)
