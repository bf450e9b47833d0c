"""`fabricproof checks`: browse the catalog (list, show)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from ..judging import catalog
from ..errors import InputError
from ..judging.evaluate import sentence
from ._common import console, input_errors, shown, whole_ids

app = typer.Typer(help="Browse the check catalog: what is checked, why, and how to fix it.", no_args_is_help=True)


@app.command("list")
@input_errors
def list_checks(
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    checks: Annotated[list[str], typer.Option("--checks", "-c", help="Ids, globs or families to list.")] = [],  # noqa: B006
) -> None:
    """List checks: id, title, severity, action (what a failure calls for), scope, family.

    Example: fabricproof checks list --checks 'nvlink.*' --format json
    """
    selected = catalog.select(catalog.load(), checks)
    if fmt == "json":
        rows = [{"id": c.id, "title": c.title, "severity": c.severity.value, "action": c.action, "scope": c.scope.value,
                 "family": c.family, "collector": c.collector, "platforms": list(c.platforms)} for c in selected]
        typer.echo(json.dumps(rows, indent=2))
        return
    if fmt != "table":
        raise InputError(f"--format {fmt!r}: choose table or json")
    # No outer frame: at 80 columns the titles need every column the whole ids leave them.
    table = Table("id", "title", "severity", "action", "scope", "family", title=f"{len(selected)} checks", show_edge=False,
                  pad_edge=False)
    whole_ids(table, 0, (c.id for c in selected))
    for c in selected:
        table.add_row(c.id, c.title, c.severity.value, c.action, c.scope.value, c.family)
    console.print(table)


@app.command("show")
@input_errors
def show(check_id: Annotated[str, typer.Argument(help="A check id, e.g. fm.version_matches_driver.")]) -> None:
    """Show one check: what it reads, what it expects, why, and the remediation."""
    by_id = {c.id: c for c in catalog.load()}
    c = by_id.get(check_id)
    if c is None:
        import difflib

        hint = difflib.get_close_matches(check_id, list(by_id), n=3)
        raise InputError(f"unknown check id {check_id!r}" + (f"; did you mean {', '.join(hint)}?" if hint else ""))
    lines = [
        f"[bold]{c.id}[/]  {shown(c.title)}",
        f"severity: {c.severity.value}   action: {c.action}   scope: {c.scope.value}   family: {c.family}",
        f"platforms: {', '.join(c.platforms) if c.platforms else 'all'}"
        + (f"   requires baseline: {', '.join(c.requires)}" if c.requires else ""),
        f"reads: collector {c.collector} ({shown(_command(c.collector))}) at {c.fact}",
        f"expects: {shown(sentence(c, technical=True))}",
        "", "[bold]why[/]", shown(c.rationale.strip()), "", "[bold]remediation[/]", shown(c.remediation.strip()),
        "", "[bold]references[/]", *(f"- {shown(r)}" for r in c.references),
        "", f"source: {c.source}",
    ]
    for line in lines:
        console.print(line, soft_wrap=True)


def _command(collector_id: str) -> str:
    from ..collectors import COLLECTORS

    return COLLECTORS[collector_id].command
