"""The root Typer app: one sub-app per command group, joined with add_typer; commands stay thin."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo

from . import __version__
from .transport import liblog

#: Every command, in the order --help lists them: name -> (module of commands/, its function, or None for a
#: sub-app `app`, the module's epilog attribute). A module is imported only when its command runs or help lists it:
#: `check --local`, which Slurm runs on every node every few minutes, loads check's imports and not the lab's,
#: the rollout's or the reporters' it never uses (~0.15 s of CPU a run).
COMMANDS: dict[str, tuple[str, str | None, str | None]] = {
    "validate": ("validate", "validate", "EPILOG"),
    "collect": ("collect", "collect", "COLLECT_EPILOG"),
    "drift": ("collect", "drift", "DRIFT_EPILOG"),
    "check": ("check", "check", "EPILOG"),
    "demo": ("demo", "demo", None),
    "init": ("init", "init", None),
    "config": ("config", "config", None),
    "rollback": ("rollback", "rollback", "EPILOG"),
    "checks": ("checks", None, None),
    "baseline": ("baseline", None, None),
    "collectors": ("collectors", None, None),
    "schema": ("schema", None, None),
    "lab": ("lab", None, None),
    "rollout": ("rollout", None, None),
    "runbook": ("runbook", None, None),
    "breaker": ("breaker", None, None),
    "fabric": ("fabric", None, None),
    "collective": ("collective", None, None),
}


class _Commands(TyperGroup):
    """The root group: each command built from its module the first time it is asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = _build(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in COMMANDS:  # a typo: typer suggests from the commands built, so build them all
            for name in COMMANDS:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)


def _build(name: str) -> Any:
    module_name, function, epilog = COMMANDS[name]
    module = importlib.import_module(f"{__package__}.commands.{module_name}")
    if function is None:
        return get_group_from_info(TyperInfo(module.app, name=name), pretty_exceptions_short=app.pretty_exceptions_short,
                                   rich_markup_mode=app.rich_markup_mode, suggest_commands=app.suggest_commands)
    info = CommandInfo(name, callback=getattr(module, function), epilog=getattr(module, epilog) if epilog else None)
    return get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short,
                                 rich_markup_mode=app.rich_markup_mode)


app = typer.Typer(
    name="fabricproof",
    cls=_Commands,
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
