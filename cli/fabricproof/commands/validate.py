"""`fabricproof validate`: prove hosts against a baseline and the check catalog, render reports, exit for CI."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated

import typer

from .. import __version__, transport
from ..judging import baseline as baseline_mod
from .. import config
from ..judging import catalog
from .. import facts as facts_mod
from .. import inventory as inventory_mod
from ..collect import DEFAULT_FORKS, DEFAULT_HOST_TIMEOUT_S, check_settings, new_run_id, reparse, select_hosts
from ..errors import InputError
from ..judging.evaluate import StreamingEvaluation, evaluate, exit_code
from ..fsutil import atomic_write_chunks
from ..reporters import REPORTERS
from ..runstore import RunStore
from ..timeutil import utc_now
from ._common import (BASELINE_HELP, FORMAT_HELP, HOST_TIMEOUT_HELP, INVENTORY_DEFAULT, OUTPUT_GONE, OUTPUT_MODE_HELP,
                      SEVERITIES, WORKERS_HELP, check_fail_on, emit_report, err_console, input_errors, output_mode,
                      pair_outputs, shown)
from . import _probes
from ._progress import collect_with_progress

EPILOG = """\
Three sources of facts:

  live      fabricproof validate -i inventory.yml -b baseline.yaml [--limit 'dgx_h100:!h100-0003'] [--via ssh|ansible|local]
            (collects first; the evidence is kept under --run-dir, default runs/<run id>)

  offline   fabricproof validate --facts runs/2026-11-30 -b baseline.yaml [-i inventory.yml for groups]

  probes    fabricproof validate -i inventory.yml -b baseline.yaml --probes nccl_all_reduce,ib_pair_bw --probe-budget 10m
            (after the collection, each probe only on idle nodes; evidence under RUNDIR/probes)

  re-parse  fabricproof validate --raw runs/2026-11-30 -b baseline.yaml   (after a parser fix, or for incident review)

Reports: fabricproof validate ... -f table -f junit=junit.xml -f sarif=fabric.sarif --fail-on warning
          (FORMAT=PATH writes that format to PATH; a bare FORMAT goes to stdout)

Exit codes: 0 all pass; 1 a check at or above --fail-on failed; 2 invalid input (nothing touched);
3 collection incomplete (collector errors or unreachable hosts, no failures), or a host not proven (checks its
hardware needs had no baseline value); 6 evidence or a report could not be written (disk full, I/O error: the
path is named, run.json says incomplete when it can still be written).
"""


def _saved_facts(facts: Path | None, raw: Path | None, inv: inventory_mod.Inventory | None, limit: str | None,
                 judge: Callable[[str, dict], None]) -> dict[str, str]:
    """Hand each host's facts from a facts or run directory, or re-parsed raw evidence, to `judge` one at a time
    (a directory of 10,000 hosts is never held whole); return the collection errors.

    The scope is the inventory (with --limit) when one is given, else the run's own manifest: a host either
    lists without facts is not collected (exit 3), never passed over."""
    source = raw or facts
    assert source is not None
    if raw:
        if not raw.is_dir():
            raise InputError(f"{raw}: run directory not found")
        reparsed, collection_errors = reparse(raw)
        if not reparsed and not collection_errors:
            raise InputError(f"{raw}: no raw evidence (raw/<host>/...) in this run directory")
        found: Iterable[tuple[str, dict]] = reparsed.items()
    else:
        found = facts_mod.iter_dir(source)
        # Hosts a run could not collect, as its run.json records them (none for a plain facts directory).
        collection_errors = {h: e["message"] for h, e in RunStore(source).recorded_errors().items()}
    manifest = RunStore(source).manifest() or {}
    unfinished = manifest.get("status", "complete") != "complete"
    if inv is not None:
        scope = set(inventory_mod.limit(inv, limit))  # every inventory host when no --limit is given
        if limit:
            collection_errors = {h: e for h, e in collection_errors.items() if h in scope}
    elif limit:
        raise InputError("--limit needs --inventory")
    else:
        scope = set(manifest.get("hosts") or ())  # the hosts the run set out to collect
    judged: set[str] = set()
    for host, doc in found:
        if inv is None or not limit or host in scope:
            judge(host, doc)
            judged.add(host)
    # A host in scope that has no facts is not a pass: it is reported as not collected (exit 3).
    why = (f"the run did not finish (run.json: status {manifest['status']}), and this host has no facts in {source}"
           if unfinished else f"no facts for this host in {source}")
    for host in sorted(scope - judged - set(collection_errors)):
        collection_errors[host] = why
    if unfinished:
        err_console.print(f"warning: {shown(source)} holds an unfinished run (run.json: status "
                          f"{shown(manifest['status'])}): {len(judged)} of {len(manifest.get('hosts') or ())} "
                          "host(s) have facts", highlight=False)
    return collection_errors


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
    checks: Annotated[list[str], typer.Option("--checks", "-c", help="Check ids, globs or families, e.g. 'nvlink.*,ib.rate'. Repeatable.")] = [],  # noqa: B006
    require_all: Annotated[bool, typer.Option("--require-all", help="Fail when a selected check applied to no host.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No collection progress.")] = False,
    mode: Annotated[str, typer.Option("--output-mode", help=OUTPUT_MODE_HELP)] = "600",
    probes: _probes.ProbesOpt = [],  # noqa: B006
    probe_budget: _probes.BudgetOpt = None,
    require_idle: _probes.RequireIdleOpt = False,
    pairing_shuffles: _probes.RoundsOpt = None,
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
    probe_ids, probe_settings = _probes.settings(probes, probe_budget, require_idle, pairing_shuffles, forks)
    if probe_ids and not live:
        raise InputError("--probes runs probes on live hosts: not with --facts or --raw")

    evidence_dir: Path | None = None
    if live:
        check_settings(forks, host_timeout, None, workers)
        hosts = select_hosts(inventory, limit, via, loaded=inv)
        options = transport.configure(via, inventory_path=inventory, accept_new_host_keys=accept_new_host_keys)
        run_id = new_run_id()
    if live and probe_ids:
        # The probes need every host's facts (the HCAs nearest each GPU) and merge theirs in: no streaming here.
        result = collect_with_progress(hosts, run_dir or Path("runs") / run_id, quiet=quiet, via=via, options=options,
                                       forks=forks, host_timeout_s=host_timeout, run_id=run_id, inventory=inventory,
                                       limit=limit, workers=workers)
        reachable = [h for h in hosts if h.name in result.facts_by_host]
        probe_run = _probes.run(reachable, result.run_dir, probe_ids, base, result.facts_by_host, via, options,
                                probe_settings, quiet)
        facts_by_host = _probes.merged(result.facts_by_host, probe_run)
        store = RunStore(result.run_dir)
        for host, doc in facts_by_host.items():
            store.write_facts(host, doc)
        _probes.show(probe_run)
        errors = {**result.collection_errors, **{h: f"probes: {e}" for h, e in probe_run.errors.items()
                                                 if h not in result.collection_errors}}
        report = evaluate(facts_by_host, base, selected, groups={h.name: h.groups for h in hosts}, previous=before,
                          collection_errors=errors, run_id=result.run_id, created_at=utc_now(),
                          tool_version=__version__)
        report = _probes.with_figures(report, probe_run)
        evidence_dir = result.run_dir
    elif live:
        # Judged as hosts finish: memory stays flat with fleet size (the facts are on disk, in the run).
        stream = StreamingEvaluation(base, selected, groups={h.name: h.groups for h in hosts}, previous=before)
        result = collect_with_progress(hosts, run_dir or Path("runs") / run_id, quiet=quiet, via=via, options=options,
                                       forks=forks, host_timeout_s=host_timeout, run_id=run_id, sink=stream.add,
                                       inventory=inventory, limit=limit, workers=workers)
        report = stream.finish(result.collection_errors, run_id=result.run_id, created_at=utc_now(),
                               tool_version=__version__)
        evidence_dir = result.run_dir
    else:
        # Judged a host at a time, as a live run is: only what fleet checks compare is kept of each host's facts.
        stream = StreamingEvaluation(base, selected, groups=dict(inv.groups_of()) if inv is not None else {},
                                     previous=before)
        collection_errors = _saved_facts(facts, raw, inv, limit, stream.add)
        report = stream.finish(collection_errors, run_id="", created_at=utc_now(), tool_version=__version__)
    written: dict[str, Path] = {}
    if evidence_dir is not None:  # the verdict sits beside the evidence it rests on
        written["json"] = RunStore(evidence_dir).report_path
        atomic_write_chunks(written["json"], REPORTERS["json"].pieces(report), mode=0o600)
        err_console.print(f"evidence and report: {evidence_dir}", highlight=False)
    emit_report(report, pairs, written, mode=file_mode)
    raise typer.Exit(exit_code(report, fail_on, require_all))

