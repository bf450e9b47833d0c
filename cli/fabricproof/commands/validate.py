"""`fabricproof validate`: prove hosts against a baseline and the check catalog, render reports, exit for CI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import transport
from ..judging import baseline as baseline_mod
from .. import config
from ..judging import catalog
from .. import facts as facts_mod
from .. import inventory as inventory_mod
from ..collect import DEFAULT_FORKS, DEFAULT_HOST_TIMEOUT_S, check_settings, new_run_id, select_hosts
from ..errors import InputError
from ..judging.pipeline import Live, Request, Saved, run
from ..probes import options as probe_options
from ..reporters import REPORTERS
from ..reporters.rollup import ROLLUP_HOSTS
from ._common import (BASELINE_HELP, FORMAT_HELP, HOST_TIMEOUT_HELP, INVENTORY_DEFAULT, OUTPUT_GONE, OUTPUT_MODE_HELP,
                      SEVERITIES, WORKERS_HELP, check_fail_on, emit_report, err_console, input_errors, output_mode,
                      pair_outputs, shown)
from . import _fabric, _probes
from ._progress import ProgressView

EPILOG = """\
Three sources of facts:

  live      fabricproof validate -i inventory.yml -b baseline.yaml [--limit 'dgx_h100:!h100-0003'] [--via ssh|ansible|local]
            (collects first; the evidence is kept under --run-dir, default runs/<run id>)

  offline   fabricproof validate --facts runs/2026-11-30 -b baseline.yaml [-i inventory.yml for groups]

  probes    fabricproof validate -i inventory.yml -b baseline.yaml --probes nccl_all_reduce,ib_pair_bw --probe-budget 10m
            (after the collection, each probe only on idle nodes; evidence under RUNDIR/probes)

  fabric    fabricproof validate -i inventory.yml -b baseline.yaml --fabric-plan fabric-plan.yaml
            (after the collection, the InfiniBand fabric is read once from the vantage host and diffed against the
            cabling plan; evidence under RUNDIR/fabric; the subnet.* checks judge each host's cables)

  re-parse  fabricproof validate --raw runs/2026-11-30 -b baseline.yaml   (after a parser fix, or for incident review)

Reports: fabricproof validate ... -f table -f junit=junit.xml -f sarif=fabric.sarif --fail-on warning
          (FORMAT=PATH writes that format to PATH; a bare FORMAT goes to stdout)

Exit codes: 0 all pass; 1 a check at or above --fail-on failed; 2 invalid input (nothing touched);
3 collection incomplete (collector errors or unreachable hosts, no failures), or a host not proven (checks its
hardware needs had no baseline value); 6 evidence or a report could not be written (disk full, I/O error: the
path is named, run.json says incomplete when it can still be written).
"""


@input_errors
def validate(
    baseline: Annotated[Path | None, typer.Option("--baseline", "-b", help=BASELINE_HELP, show_default=False)] = None,
    facts: Annotated[Path | None, typer.Option("--facts", help="Evaluate saved facts: a directory of <host>.json, or a run directory.")] = None,
    raw: Annotated[Path | None, typer.Option("--raw", help="Re-parse a run directory's raw evidence, then evaluate.")] = None,
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Ansible inventory: the hosts to collect (live), or their groups (with --facts/--raw)." + INVENTORY_DEFAULT)] = None,
    limit: Annotated[str | None, typer.Option("--limit", "-l", help="Ansible host pattern, e.g. 'dgx_h100:!h100-0003'.")] = None,
    via: Annotated[str, typer.Option("--via", help=f"Live collection over {transport.choices(transport.LIVE)}.")] = "ssh",
    forks: Annotated[int, typer.Option("--forks", help="Hosts collected at once.")] = DEFAULT_FORKS,
    workers: Annotated[int | None, typer.Option("--workers", help=WORKERS_HELP)] = None,
    host_timeout: Annotated[float, typer.Option("--host-timeout", help=HOST_TIMEOUT_HELP)] = DEFAULT_HOST_TIMEOUT_S,
    accept_new_host_keys: Annotated[bool, typer.Option("--accept-new-host-keys", help="Record unknown host keys instead of refusing the host (never a changed key).")] = False,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Where a live run keeps its evidence (default runs/<run id>).")] = None,
    previous: Annotated[Path | None, typer.Option("--previous", help="Earlier facts of the same hosts: enables counter-delta checks.")] = None,
    fmt: Annotated[list[str], typer.Option("--format", "-f", help=FORMAT_HELP.format(choices=", ".join(REPORTERS)))] = [],  # noqa: B006
    output: Annotated[list[Path], typer.Option("--output", "-o", hidden=True, help=OUTPUT_GONE)] = [],  # noqa: B006
    fail_on: Annotated[str, typer.Option("--fail-on", help=f"Lowest severity that makes the exit code 1: {SEVERITIES}.")] = "critical",
    checks: Annotated[list[str], typer.Option("--checks", "-c", help="Check ids, globs or families, e.g. 'nvlink.*,ib.rate'. Repeatable. A live run collects only what they read.")] = [],  # noqa: B006
    require_all: Annotated[bool, typer.Option("--require-all", help="Fail when a selected check applied to no host.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No collection progress.")] = False,
    hosts_table: Annotated[bool, typer.Option("--hosts", "-v", help="The table lists every host and each failure on it "
                                              f"(the default up to {ROLLUP_HOSTS} hosts; above, it rolls up by check).")] = False,
    mode: Annotated[str, typer.Option("--output-mode", help=OUTPUT_MODE_HELP)] = "600",
    probes: _probes.ProbesOpt = [],  # noqa: B006
    probe_budget: _probes.BudgetOpt = None,
    require_idle: _probes.RequireIdleOpt = False,
    pairing_shuffles: _probes.RoundsOpt = None,
    fabric_plan: _fabric.FabricPlanOpt = None,
    fabric_window: _fabric.FabricWindowOpt = _fabric.DEFAULT_WINDOW_S,
) -> None:
    """Prove hosts against a baseline and the check catalog: live over SSH/Ansible/local, or from saved evidence."""
    baseline, inventory = config.baseline(baseline), config.inventory(inventory)
    check_fail_on(fail_on)
    file_mode = output_mode(mode)
    if facts and raw:
        raise InputError("give --facts or --raw, not both")
    live = facts is None and raw is None
    reaches_itself = transport.kind(via, transport.LIVE).reach is transport.Reach.SELF
    if live and not reaches_itself and not inventory:
        raise InputError("nothing to validate: give --inventory (live), --facts DIR or --raw RUNDIR")
    # Every input is read and checked before any host is touched.
    pairs = pair_outputs(fmt, output)
    base = baseline_mod.load(baseline)
    inv = inventory_mod.load(inventory) if inventory and not (live and reaches_itself) else None
    if inv is not None:
        baseline_mod.check_groups(base, inv.groups, inventory)
    selected = catalog.select(catalog.load(), checks)
    before = facts_mod.load_dir(previous) if previous else None
    probe_ids, probe_settings = probe_options.settings(probes, probe_budget, require_idle, pairing_shuffles, forks)
    if probe_ids and not live:
        raise InputError("--probes runs probes on live hosts: not with --facts or --raw")
    plan = _fabric.load(fabric_plan, fabric_window, inv.groups if inv is not None else None) if fabric_plan else None
    if plan is not None and not live:
        raise InputError("--fabric-plan reads the fabric from a live vantage host: not with --facts or --raw")

    if live:
        check_settings(forks, host_timeout, None, workers)
        hosts = select_hosts(inventory, limit, via, loaded=inv)
        options = transport.configure(via, inventory_path=inventory, accept_new_host_keys=accept_new_host_keys)
        run_id = new_run_id()
        then = _fabric.chained(
            _probes.after_collection(hosts, probe_ids, base, via, options, probe_settings, quiet,
                                     errors_lose_hosts=True) if probe_ids else None,
            _fabric.after_collection(plan, list(inv.hosts.values()) if inv is not None else hosts, via, options,
                                     fabric_window, quiet, run_id) if plan is not None else None)
        request = Request(Live(hosts, run_dir or Path("runs") / run_id, via=via, options=options,
                               collectors=_narrowed(selected) if checks and not probe_ids and plan is None else None,
                               forks=forks,
                               host_timeout_s=host_timeout, workers=workers, inventory=inventory, limit=limit,
                               progress=ProgressView(err_console, len(hosts), quiet=quiet), then=then),
                          base, selected, groups={h.name: h.groups for h in hosts}, previous=before, reports=("json",),
                          run_id=run_id)
    else:
        request = Request(Saved(facts, raw, inv, limit), base, selected,
                          groups=dict(inv.groups_of()) if inv is not None else {}, previous=before)
    judged = run(request)
    catalog.keep()  # the next run reads the checked catalog back rather than parsing its ~110 files (~0.1 s of CPU)
    if (u := judged.unfinished) is not None:
        err_console.print(f"warning: {shown(u.source)} holds an unfinished run (run.json: status {shown(u.status)}): "
                          f"{u.with_facts} of {u.hosts} host(s) have facts", highlight=False)
    if judged.evidence_dir is not None:  # the verdict sits beside the evidence it rests on
        err_console.print(f"evidence and report: {judged.evidence_dir}", highlight=False)
    emit_report(judged.report, pairs, judged.written, mode=file_mode, per_host=hosts_table or None)
    raise typer.Exit(judged.exit_code(fail_on, require_all))


def _narrowed(selected: list[catalog.Check]) -> list | None:
    """--checks: only the collectors those checks read (their own, those providing the facts they compare with or
    apply by, and the platform's), so nothing is run, parsed or kept that no selected check reads; None (the
    standard set) when they read none. Probes and the fabric plan read the hosts' facts beyond any check, so a run
    with them collects the standard set."""
    from ..judging.projection import collected_for

    return collected_for(selected) or None
