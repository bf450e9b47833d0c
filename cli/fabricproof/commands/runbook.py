"""`fabricproof runbook`: check and run incident runbooks (ordered playbook, validate, rollback, wait, confirm steps)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .. import inventory as inventory_mod
from ..errors import InputError, Problem
from ..rollout import runs
from ..rollout import runbook as runbook_mod
from ..rollout.store import RolloutStore
from ._common import console, err_console, input_errors, shown
from ._runlog import print_decision_log, progress

app = typer.Typer(
    help="Incident runbooks: ordered steps (playbook, validate, rollback, wait, confirm) that ask before changing "
         "anything, record every decision and end with an evidence bundle.\n\nExit codes: 0 every step done · "
         "1 a step failed · 2 bad input · 5 the operator declined a step, or a rollback is not proven · 6 the run's "
         "records could not be written (disk full, I/O error).",
    no_args_is_help=True,
)


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        err_console.print(shown(f"{question} [no terminal to answer on: declined; use --yes to run unattended]"),
                          soft_wrap=True)
        return False
    return typer.confirm(question, default=False, err=True)


@app.command("lint")
@input_errors
def lint(file: Annotated[Path, typer.Argument(help="Runbook YAML (kind: Runbook).", show_default=False)]) -> None:
    """Validate a runbook: schema, one action per step, playbooks, baselines and checks it names."""
    rb = runbook_mod.load(file)
    console.print(f"{shown(str(file))}: ok — runbook {shown(rb.name)}, {len(rb.steps)} step(s)", soft_wrap=True)
    for s in rb.steps:
        mark = " (asks first)" if s.kind in runbook_mod.MUTATING else ""
        console.print(f"  {s.index + 1}. {s.kind:<8} {shown(s.name)}{mark}", soft_wrap=True)


@app.command("run")
@input_errors
def run(
    file: Annotated[Path, typer.Argument(help="Runbook YAML (kind: Runbook).", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before mutating steps and confirmations.")] = False,
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Ansible inventory; overrides the runbook's.")] = None,
    limit: Annotated[str | None, typer.Option("--limit", "-l", help="Ansible host pattern: narrow every step to these.")] = None,
    runs_dir: Annotated[Path, typer.Option("--runs-dir", help="Where runs are kept (the same as rollouts).")] = Path("runs"),
) -> None:
    """Run a runbook step by step. Every playbook and rollback step asks first unless --yes; every answer, result and
    evidence path goes to decisions.jsonl; the run ends with RUNS_DIR/<run id>/evidence.tar.gz."""
    rb = runbook_mod.load(file)
    inv_path = inventory or (str(rb.inventory) if rb.inventory else None)
    if inv_path is None:
        raise InputError(Problem("the runbook names no spec.inventory: give one with -i INVENTORY", str(rb.source)))
    inv = inventory_mod.load(inv_path)
    session = runbook_mod.Session(runbook=rb, inventory_path=inv_path, inventory=inv,
                                  runs_dir=runs.ensure_runs_dir(runs_dir), yes=yes, ask=_ask, limit=limit,
                                  progress=progress)
    rr = runbook_mod.RunbookRun(session)
    code = rr.run()
    print_decision_log(rr.dir)
    err_console.print(shown(f"evidence bundle {RolloutStore(rr.dir).bundle_path}"), soft_wrap=True)
    raise typer.Exit(int(code))
