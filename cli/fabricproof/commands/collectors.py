"""`fabricproof collectors`: list the probes and parse saved raw output offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..collectors import COLLECTORS, ParseError
from ..errors import InputError
from ._common import console, input_errors, shown

app = typer.Typer(help="The collectors: fixed commands plus pure parsers from raw text to facts.", no_args_is_help=True)


@app.command("list")
@input_errors
def list_collectors(fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table") -> None:
    """List every collector: id, command, where its facts land, platforms."""
    rows = [{"id": c.id, "command": c.command, "provides": c.provides, "family": c.family, "platforms": list(c.platforms),
             "default": c.default, "description": c.description} for c in COLLECTORS.values()]
    if fmt == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    if fmt != "table":
        raise InputError(f"--format {fmt!r}: choose table or json")
    table = Table("id", "command", "provides", "default", title=f"{len(rows)} collectors")
    for r in rows:
        table.add_row(r["id"], shown(r["command"]), r["provides"], "yes" if r["default"] else "no")
    console.print(table)


@app.command("parse")
@input_errors
def parse(
    collector_id: Annotated[str, typer.Argument(help="Collector id, e.g. ibstat or nvidia_smi_q.")],
    file: Annotated[Path, typer.Argument(help="Saved raw output of the collector's command.")],
) -> None:
    """Parse a saved output and print the facts fragment as JSON (exit 0), or a one-line reason (exit 1).

    Partial outputs (an excerpt, `lspci -vvv | grep ACSCtl`, `nvidia-smi -q -d ECC`) parse as far as they carry
    facts; what the parser noticed is printed as notes on stderr.

    Example: fabricproof collectors parse nvlink_status nvlink-s.txt
    """
    collector = COLLECTORS.get(collector_id)
    if collector is None:
        raise InputError(f"unknown collector {collector_id!r}; see `fabricproof collectors list`")
    if not file.is_file():
        raise InputError(f"{file}: file not found")
    text = file.read_bytes().decode("utf-8", errors="replace")  # hosts print garbage too; the parser judges it
    try:
        fragment = collector.parse(text)
    except ParseError as exc:
        typer.echo(f"{file}: cannot parse as {collector_id}: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(fragment, indent=2))
    # A partial output pasted into a ticket parses as far as it carries facts; say what was missing or odd.
    for note in (fragment.get("notes") or ()) if isinstance(fragment, dict) else ():
        typer.echo(f"{file}: note: {shown(str(note))}", err=True)
