"""The fabricproof CLI with the rollout commands, for tests: the root app once cli.py registers them, else a root
built here from the same sub-apps (so tests and subprocess rehearsals run the real commands either way)."""

from __future__ import annotations

import sys

import typer


def app() -> typer.Typer:
    from fabricproof.cli import app as root

    names = {g.name for g in root.registered_groups} | {c.name for c in root.registered_commands}
    if {"rollout", "rollback", "runbook"} <= names:
        return root
    from fabricproof.commands import rollback, rollout, runbook

    local = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
    local.add_typer(rollout.app, name="rollout")
    local.command("rollback", epilog=rollback.EPILOG)(rollback.rollback)
    local.add_typer(runbook.app, name="runbook")
    for group in root.registered_groups:
        local.registered_groups.append(group)
    local.registered_commands.extend(root.registered_commands)
    return local


if __name__ == "__main__":
    sys.argv[0] = "fabricproof"
    app()()
