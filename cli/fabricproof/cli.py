"""The root Typer app: one sub-app per command group, joined with add_typer; commands stay thin."""

from __future__ import annotations

from typing import Annotated

import typer

from . import __version__
from .commands import (baseline, breaker, check, checks, collect, collectors, config, demo, init, lab, rollback, rollout,
                       runbook, schema, validate)
from .transport import liblog

app = typer.Typer(
    name="fabricproof",
    help=(
        "Prove a GPU cluster's fabric (Fabric Manager, NVLink, NVSwitch, InfiniBand/RoCE, GPUDirect RDMA) against a "
        "schema-checked baseline, and roll changes out in gated waves.\n\n"
        "Exit codes: 0 pass · 1 check failed · 2 invalid input · 3 incomplete collection · 4 rolled back · "
        "5 halted for an operator · 6 a file could not be written (disk full, I/O error) · 130 interrupted."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fabricproof {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """fabricproof: fabric validation and staged rollouts for GPU clusters."""
    # Before any library runs: what paramiko and ansible-runner log never reaches the terminal raw.
    liblog.capture()


app.command("validate", epilog=validate.EPILOG)(validate.validate)
app.command("collect", epilog=collect.COLLECT_EPILOG)(collect.collect)
app.command("drift", epilog=collect.DRIFT_EPILOG)(collect.drift)
app.command("check", epilog=check.EPILOG)(check.check)
app.command("demo")(demo.demo)
app.command("init")(init.init)
app.command("config")(config.config)
app.add_typer(checks.app, name="checks")
app.add_typer(baseline.app, name="baseline")
app.add_typer(collectors.app, name="collectors")
app.add_typer(schema.app, name="schema")
app.add_typer(lab.app, name="lab")
app.add_typer(rollout.app, name="rollout")
app.command("rollback", epilog=rollback.EPILOG)(rollback.rollback)
app.add_typer(runbook.app, name="runbook")
app.add_typer(breaker.app, name="breaker")
