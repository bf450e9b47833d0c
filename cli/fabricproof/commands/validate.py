"""`fabricproof validate`: evaluate facts against a baseline and the check catalog, render reports, exit for CI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import __version__, catalog
from .. import baseline as baseline_mod
from .. import facts as facts_mod
from .. import inventory as inventory_mod
from ..evaluate import evaluate, exit_code
from ..timeutil import utc_now
from ._common import emit_report, input_errors, pair_outputs

EPILOG = """\
Examples:

  fabricproof validate --facts inventories/dgx-h100/facts -b inventories/dgx-h100/baseline.yaml

  fabricproof validate --facts runs/2026-11-30/facts -b baseline.yaml -i inventory.yml \\
      -f table -f junit -o junit.xml -f sarif -o fabric.sarif --fail-on warning

Exit codes: 0 all pass; 1 a check at or above --fail-on failed; 2 invalid input (nothing touched);
3 collection incomplete (collector errors or unreachable hosts, no failures).
"""


@input_errors
def validate(
    facts: Annotated[Path, typer.Option("--facts", help="Directory of <host>.json facts (or a run directory holding facts/).", show_default=False)],
    baseline: Annotated[Path, typer.Option("--baseline", "-b", help="Baseline YAML (kind: Baseline).", show_default=False)],
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Ansible inventory: host groups select baseline overrides and fleet partitions.")] = None,
    limit: Annotated[str | None, typer.Option("--limit", "-l", help="Ansible host pattern, e.g. 'dgx_h100:!h100-0003'.")] = None,
    previous: Annotated[Path | None, typer.Option("--previous", help="Earlier facts of the same hosts: enables counter-delta checks.")] = None,
    fmt: Annotated[list[str], typer.Option("--format", "-f", help="table, json, junit, sarif, tap, prometheus, markdown, html. Repeatable.")] = [],  # noqa: B006
    output: Annotated[list[Path], typer.Option("--output", "-o", help="File for the --format at the same position. Repeatable.")] = [],  # noqa: B006
    fail_on: Annotated[str, typer.Option("--fail-on", help="Lowest severity that makes the exit code 1: critical, warning or info.")] = "critical",
    checks: Annotated[list[str], typer.Option("--checks", "-c", help="Check ids, globs or families to run, e.g. 'nvlink.*,ib.rate'. Repeatable.")] = [],  # noqa: B006
    require_all: Annotated[bool, typer.Option("--require-all", help="Fail when a selected check applied to no host.")] = False,
) -> None:
    """Evaluate collected facts against a baseline and the check catalog."""
    if fail_on not in ("critical", "warning", "info"):
        raise typer.BadParameter("choose critical, warning or info", param_hint="--fail-on")
    pairs = pair_outputs(fmt, output)
    base = baseline_mod.load(baseline)
    selected = catalog.select(catalog.load(), checks)
    facts_by_host = facts_mod.load_dir(facts)
    before = facts_mod.load_dir(previous) if previous else None
    groups: dict[str, tuple[str, ...]] = {}
    if inventory:
        inv = inventory_mod.load(inventory)
        groups = inv.groups_of()
        if limit:
            keep = set(inventory_mod.limit(inv, limit))
            facts_by_host = {h: f for h, f in facts_by_host.items() if h in keep}
    elif limit:
        raise typer.BadParameter("--limit needs --inventory", param_hint="--limit")
    report = evaluate(facts_by_host, base, selected, groups=groups, previous=before,
                      created_at=utc_now(), tool_version=__version__)
    emit_report(report, pairs)
    raise typer.Exit(exit_code(report, fail_on, require_all))
