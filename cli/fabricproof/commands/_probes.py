"""What `validate --probes` and `check --local --probes` share: the probe options, the run with its progress
(a line per probe and host, per pair and round), and the figures table (worst hosts first) on stderr."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..judging.baseline import Baseline
from ..collect.probes import DEFAULT_RENDEZVOUS_S, ProbeEvent, ProbeRun, ProbeSettings, merge_into, run_probes, select_probes
from ..collectors.probes.figures import worst_first
from ..errors import InputError
from ..model import Host, Report
from ..rollout.plan import parse_duration
from ..runstore import PROBES_DIR, RunStore
from ._common import err_console, shown

ProbesOpt = Annotated[list[str], typer.Option(
    "--probes", help="Probes to run after the collection, only on idle nodes: nccl_all_reduce, nvbandwidth, "
    "ib_gdr_bw, ib_pair_bw, ... (comma-separated or repeated).")]
BudgetOpt = Annotated[str | None, typer.Option(
    "--probe-budget", help="Time for the whole probe run, e.g. 10m: probes not started by then are recorded as not "
    "run, running ones are stopped.")]
RequireIdleOpt = Annotated[bool, typer.Option(
    "--require-idle", help="A node doing work (GPU compute processes, Slurm job steps) is an error, not a skip.")]
RoundsOpt = Annotated[int | None, typer.Option(
    "--pairing-shuffles", help="Shuffled matchings after the ring for pairwise probes (default: about log2 N rounds "
    "in all).")]


def settings(probes: Sequence[str], budget: str | None, require_idle: bool, shuffles: int | None,
             forks: int) -> tuple[tuple[str, ...], ProbeSettings]:
    """The probe ids and settings from the options (exit 2 on a bad one, before any host is touched)."""
    ids = select_probes(probes)
    budget_s: float | None = None
    if budget is not None:
        try:
            budget_s = float(parse_duration(int(budget) if budget.isdigit() else budget))
        except ValueError as exc:
            raise InputError(f"--probe-budget: {exc}") from None
        if budget_s <= 0:
            raise InputError("--probe-budget must be positive")
    if not ids and (budget is not None or require_idle or shuffles is not None):
        raise InputError("--probe-budget, --require-idle and --pairing-shuffles go with --probes")
    if shuffles is not None and shuffles < 0:
        raise InputError("--pairing-shuffles must be 0 or more")
    return ids, ProbeSettings(budget_s=budget_s, require_idle=require_idle, shuffles=shuffles, forks=forks,
                              rendezvous_s=DEFAULT_RENDEZVOUS_S)


def event_line(ev: ProbeEvent) -> str:
    return f"probe {ev.probe} [{ev.stage}] {ev.subject}: {ev.message or ev.status} ({ev.elapsed_s:.1f} s)"


def run(hosts: Sequence[Host], run_dir: Path, ids: Sequence[str], base: Baseline, facts: Mapping[str, Any],
        via: str, options: Any, probe_settings: ProbeSettings, quiet: bool = False) -> ProbeRun:
    """The probes into RUNDIR/probes, a progress line per result on stderr."""

    def progress(ev: ProbeEvent) -> None:
        if not quiet:
            err_console.print(shown(event_line(ev)), soft_wrap=True, highlight=False)

    return run_probes(hosts, RunStore(run_dir).probes_root, ids, values=lambda h: base.for_groups(h.groups),
                      facts=facts, via=via, options=options, settings=probe_settings, progress=progress)


def merged(facts_by_host: Mapping[str, dict[str, Any]], probe_run: ProbeRun) -> dict[str, dict[str, Any]]:
    """Each host's facts with its probe facts in them (evidence paths relative to the main run directory)."""
    return {h: merge_into(doc, probe_run.facts_by_host.get(h, {}), PROBES_DIR) for h, doc in facts_by_host.items()}


def with_figures(report: Report, probe_run: ProbeRun | None) -> Report:
    """The report carrying every probe figure with its unit, worst first (the JSON report's `figures`)."""
    if probe_run is None:
        return report
    rows = tuple({"host": f.host, "probe": f.probe, "target": f.target, "figure": f.name, "value": f.value,
                  "unit": f.unit, "higher_is_better": f.higher_is_better} for f in worst_first(probe_run.figures()))
    return dataclasses.replace(report, figures=rows)


def figures_table(probe_run: ProbeRun) -> Table:
    """Every figure, worst first within each probe and figure (lowest bandwidth, highest latency)."""
    table = Table(title="probe figures (worst first)", title_justify="left")
    for col in ("probe", "figure", "host", "target", "value", "unit"):
        table.add_column(col, justify="right" if col == "value" else "left")
    for f in worst_first(probe_run.figures()):
        table.add_row(f.probe, f.name, f.host, f.target or "-", f"{f.value:g}", f.unit)
    return table


def blame_lines(probe_run: ProbeRun) -> list[str]:
    """What the pairing says about each host that is not simply fine, and how many rounds it took."""
    lines = []
    for probe, rounds in probe_run.rounds.items():
        lines.append(f"{probe}: {len(rounds)} rounds, {len(probe_run.pairs.get(probe, {}))} pairs measured")
        for host, b in sorted(probe_run.blame.get(probe, {}).items()):
            if b.verdict in ("at fault", "pair only"):
                lines.append(f"{probe}: {host} {b.verdict}: slow with {', '.join(b.slow_with) or '-'}; "
                             f"fine with {', '.join(b.good_with) or 'none'}")
    if probe_run.stopped == "budget":
        lines.append("probe budget spent: the probes not started are recorded as not run")
    return lines


def show(probe_run: ProbeRun) -> None:
    if probe_run.figures():
        err_console.print(figures_table(probe_run))
    for line in blame_lines(probe_run):
        err_console.print(shown(line), soft_wrap=True, highlight=False)
