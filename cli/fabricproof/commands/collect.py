"""`fabricproof collect` (run the collectors on a fleet into a run directory) and `fabricproof drift` (compare two)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from .. import facts as facts_mod
from .. import config, transport
from ..collect import (DEFAULT_FORKS, DEFAULT_HOST_TIMEOUT_S, CollectResult, check_settings, select_collectors,
                       select_hosts)
from ..errors import InputError
from ..runstore import RunStore
from ._common import HOST_TIMEOUT_HELP, INVENTORY_DEFAULT, WORKERS_HELP, console, err_console, input_errors, shown
from ._progress import collect_with_progress

COLLECT_EPILOG = """\
Examples:

  fabricproof collect -i inventory.yml -o runs/$(date +%F)

  fabricproof collect -i inventory.yml --limit 'dgx_h100:!h100-0003' --collectors 'nvlink_*,ibstat' -o runs/nvl

  fabricproof collect -i inventory.yml --via ansible --forks 50 -o runs/ansible

  fabricproof collect -i inventory.yml --forks 256 --workers 8 -o runs/big

Writes RUNDIR/raw/<host>/<collector>.txt (+ .stderr, meta.json), RUNDIR/facts/<host>.json and RUNDIR/run.json;
evaluate them with `fabricproof validate --facts RUNDIR -b BASELINE`.

Exit codes: 0 every host and collector collected; 2 invalid input (no host touched);
3 some host or collector was not collected (see RUNDIR/run.json); 6 the run directory could not be written
(disk full, I/O error: the path is named, run.json says incomplete with the reason when it can still be written).
"""

DRIFT_EPILOG = """\
Example: fabricproof drift runs/before runs/after --format json

Lists version changes (driver, CUDA, Fabric Manager, VBIOS, NVSwitch and HCA firmware, PSID, OFED) and
error-counter growth (NVLink replay/recovery/CRC, IB error counters) per host.
Exit codes: 0 no drift; 1 drift found; 2 invalid input.
"""


def _summary(result: CollectResult, out: Console) -> None:
    n = len(result.hosts)
    rate = n / result.duration_s if result.duration_s > 0 else 0.0
    collected = len(result.collected)
    out.print(f"collected {collected}/{n} hosts in {result.duration_s:.1f} s ({rate:.1f} hosts/s) "
                      f"-> {shown(str(result.run_dir))}", soft_wrap=True, highlight=False)
    if result.errors:
        out.print(f"[red]not collected ({len(result.errors)}):[/]")
        for host, err in sorted(result.errors.items()):
            out.print(f"  {shown(host)}: {shown(str(err))}", soft_wrap=True, highlight=False)
    if result.collector_errors:
        out.print(f"[yellow]collector errors on {len(result.collector_errors)} host(s):[/]")
        for host, failed in sorted(result.collector_errors.items()):
            for cid, why in failed.items():
                out.print(f"  {shown(host)} {cid}: {shown(why)}", soft_wrap=True, highlight=False)


@input_errors
def collect(
    output: Annotated[Path, typer.Option("--output", "-o", help="Run directory to create (must be new or empty).",
                                         show_default=False)],
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Ansible inventory (any form Ansible reads)." + INVENTORY_DEFAULT)] = None,
    limit: Annotated[str | None, typer.Option("--limit", "-l", help="Ansible host pattern, e.g. 'dgx_h100:!h100-0003'.")] = None,
    via: Annotated[str, typer.Option("--via", help=f"How commands reach the hosts: {transport.choices(transport.LIVE)}.")] = "ssh",
    forks: Annotated[int, typer.Option("--forks", help="Hosts collected at once.")] = DEFAULT_FORKS,
    workers: Annotated[int | None, typer.Option("--workers", help=WORKERS_HELP)] = None,
    accept_new_host_keys: Annotated[bool, typer.Option("--accept-new-host-keys", help="Record unknown host keys "
                                                       "instead of refusing the host (never accepts a changed key).")] = False,
    collectors: Annotated[list[str], typer.Option("--collectors", "-c", help="Collector ids or globs, comma-separated "
                                                  "or repeated (default: the standard set).")] = [],  # noqa: B006
    host_timeout: Annotated[float, typer.Option("--host-timeout", help=HOST_TIMEOUT_HELP)] = DEFAULT_HOST_TIMEOUT_S,
    command_timeout: Annotated[float | None, typer.Option("--command-timeout", help="Cap on every collector's own timeout, in seconds.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="Summary on stdout: text or json (run.json).")] = "text",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress; only errors.")] = False,
) -> None:
    """Run the collectors on every host: raw evidence and facts into a run directory."""
    if fmt not in ("text", "json"):
        raise InputError(f"--format {fmt!r}: choose text or json")
    inventory = config.inventory(inventory)
    check_settings(forks, host_timeout, command_timeout, workers)
    chosen = select_collectors(collectors)
    hosts = select_hosts(inventory, limit, via)
    options = transport.configure(via, inventory_path=inventory, accept_new_host_keys=accept_new_host_keys)
    result = collect_with_progress(hosts, output, quiet=quiet, via=via, options=options, collectors=chosen,
                                   forks=forks, host_timeout_s=host_timeout, command_timeout_s=command_timeout,
                                   inventory=inventory, limit=limit, workers=workers)
    if fmt == "json":
        sys.stdout.write(RunStore(result.run_dir).manifest_text())
    if not quiet or not result.complete:
        _summary(result, err_console if fmt == "json" else console)
    raise typer.Exit(result.exit_code)


def _render_drift_table(drift: Any, a: Path, b: Path) -> None:
    from ..judging.drift import Drift

    assert isinstance(drift, Drift)
    console.print(f"drift {shown(str(a))} -> {shown(str(b))}: {len(drift.hosts_compared)} host(s) compared, "
                  f"{len(drift.changes)} change(s)", highlight=False, soft_wrap=True)
    if drift.changes:
        table = Table("host", "kind", "what", "before", "after", "delta")
        for c in drift.changes:
            delta = "" if c.delta is None else f"+{c.delta}" + (" (reset)" if c.reset else "")
            table.add_row(shown(c.host), c.kind, shown(c.what), shown(str(c.before)), shown(str(c.after)), delta)
        console.print(table)
    for label, hosts in (("only in A", drift.only_in_a), ("only in B", drift.only_in_b)):
        if hosts:
            console.print(f"{label}: {shown(', '.join(hosts))}", highlight=False, soft_wrap=True)


@input_errors
def drift(
    run_a: Annotated[Path, typer.Argument(help="Earlier run directory (or facts directory).", show_default=False)],
    run_b: Annotated[Path, typer.Argument(help="Later run directory (or facts directory).", show_default=False)],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Compare two collections: version changes and error-counter deltas per host."""
    from ..judging.drift import compare

    if fmt not in ("table", "json"):
        raise InputError(f"--format {fmt!r}: choose table or json")
    before = facts_mod.load_dir(run_a)
    after = facts_mod.load_dir(run_b)
    result = compare(before, after)
    if fmt == "json":
        sys.stdout.write(json.dumps({"a": str(run_a), "b": str(run_b), **result.as_dict()}, indent=2) + "\n")
    else:
        _render_drift_table(result, run_a, run_b)
    raise typer.Exit(1 if result.any else 0)
