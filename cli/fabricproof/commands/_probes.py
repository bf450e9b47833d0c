"""What `validate --probes` and `check --local --probes` share on the terminal: the probe options (Typer), the run
with its progress (a line per probe and host, per pair and round), and the figures table (worst hosts first) on
stderr. Reading the options and merging the probes' facts and figures are the probes package's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..collect import CollectResult
from ..judging.baseline import Baseline
from ..judging.pipeline import Added
from ..model import Host
from ..runstore import RunStore
from ._common import consoles, shown

if TYPE_CHECKING:  # the runner and rich are imported when probes run: `check --local` without --probes loads neither
    from rich.table import Table

    from ..probes.runner import ProbeEvent, ProbeRun, ProbeSettings

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


def event_line(ev: ProbeEvent) -> str:
    return f"probe {ev.probe} [{ev.stage}] {ev.subject}: {ev.message or ev.status} ({ev.elapsed_s:.1f} s)"


def run(hosts: Sequence[Host], run_dir: Path, ids: Sequence[str], base: Baseline, facts: Mapping[str, Any],
        via: str, options: Any, probe_settings: ProbeSettings, quiet: bool = False) -> ProbeRun:
    """The probes into RUNDIR/probes, a progress line per result on stderr."""
    from ..probes.runner import run_probes

    def progress(ev: ProbeEvent) -> None:
        if not quiet:
            consoles()[1].print(shown(event_line(ev)), soft_wrap=True, highlight=False)

    return run_probes(hosts, RunStore(run_dir).probes_root, ids, values=lambda h: base.for_groups(h.groups),
                      facts=facts, via=via, options=options, settings=probe_settings, progress=progress)


def figures_table(probe_run: ProbeRun) -> Table:
    """Every figure, worst first within each probe and figure (lowest bandwidth, highest latency)."""
    from rich.table import Table

    from ..probes.figures import worst_first

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
        consoles()[1].print(figures_table(probe_run))
    for line in blame_lines(probe_run):
        consoles()[1].print(shown(line), soft_wrap=True, highlight=False)


def after_collection(hosts: Sequence[Host], ids: Sequence[str], base: Baseline, via: str, options: Any,
                     probe_settings: ProbeSettings, quiet: bool, *, errors_lose_hosts: bool
                     ) -> Callable[[CollectResult], Added]:
    """The probes as the pipeline's step after a collection: run on the hosts collected (they need every host's
    facts: the HCAs nearest each GPU), their facts merged in and their figures added to the report. With
    `errors_lose_hosts` (validate), a host the probes could not serve is not collected; check --local reports the
    probe's error through its checks instead."""

    def then(result: CollectResult) -> Added:
        reachable = [h for h in hosts if h.name in result.facts_by_host]
        if not reachable:
            return Added(result.facts_by_host)
        from ..probes.runner import merged, with_figures

        probe_run = run(reachable, result.run_dir, ids, base, result.facts_by_host, via, options, probe_settings,
                        quiet)
        show(probe_run)
        lost = {h: f"probes: {e}" for h, e in probe_run.errors.items()} if errors_lose_hosts else {}
        return Added(merged(result.facts_by_host, probe_run), lost,
                     lambda report: with_figures(report, probe_run))

    return then
