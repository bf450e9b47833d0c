"""`fabricproof breaker`: show and reset the drain breaker that `check --local --drain` obeys."""

from __future__ import annotations

import getpass
import os
import time
from typing import Annotated

import typer

from .. import breaker, slurm
from ..errors import InputError
from ._breaker import LimitOpt, WindowOpt
from ._common import console, err_console, input_errors, shown

app = typer.Typer(
    help="The drain breaker: `check --local --drain` drains a node only while fewer than --breaker of its partition "
         "were drained by fabricproof in --breaker-window (from Slurm's node state); past it the breaker opens, "
         "nodes are reported and left in service, and it stays open until a person resets it.\n\n"
         "Exit codes: 0 done · 2 bad input or Slurm not reachable.",
    no_args_is_help=True,
)

PartitionOpt = Annotated[list[str], typer.Option(
    "--partition", "-p", help="Judge the nodes of these partitions (repeatable; a node judges every partition it is "
    "in). Default: every node.")]


def _scope(partitions: list[str]) -> list[breaker.ClusterNode]:
    try:
        nodes = breaker.read()
    except slurm.SlurmError as exc:
        raise InputError(str(exc)) from None
    known = {p for n in nodes for p in n.partitions}
    unknown = [p for p in partitions if p not in known]
    if unknown:
        raise InputError(f"--partition {unknown[0]}: Slurm has no such partition (it has: {', '.join(sorted(known))})")
    return breaker.in_partitions(nodes, partitions)


@app.command("status")
@input_errors
def status(partition: PartitionOpt = [],  # noqa: B006
           limit: LimitOpt = breaker.DEFAULT_LIMIT, window: WindowOpt = breaker.DEFAULT_WINDOW) -> None:
    """Show whether the breaker is open, and the drains it counts."""
    lim, window_s = breaker.parse_limit(limit), breaker.parse_window(window)
    verdict = breaker.judge(_scope(partition), lim, window_s, time.time())
    console.print(shown(verdict.headline()), soft_wrap=True, highlight=False)
    for line in verdict.lines():
        console.print(shown(line), soft_wrap=True, highlight=False)


@app.command("reset")
@input_errors
def reset(partition: PartitionOpt = [],  # noqa: B006
          limit: LimitOpt = breaker.DEFAULT_LIMIT, window: WindowOpt = breaker.DEFAULT_WINDOW) -> None:
    """Close the breaker: drains made so far stop counting, and nodes may be drained again up to the limit."""
    lim, window_s = breaker.parse_limit(limit), breaker.parse_window(window)
    scope = _scope(partition)
    who = os.environ.get("SUDO_USER") or getpass.getuser()
    try:
        marked, kept = breaker.reset(scope, who, time.time())
    except slurm.SlurmError as exc:
        raise InputError(str(exc)) from None
    if not marked:
        raise InputError("no node's Comment is free to carry the reset (each has a Comment of someone else's)")
    after = breaker.judge(_scope(partition), lim, window_s, time.time())
    console.print(shown(f"breaker reset by {who} on {len(marked)} node(s): {after.headline()}"), soft_wrap=True,
                  highlight=False)
    if kept:
        err_console.print(shown(f"left alone (a Comment of someone else's): {', '.join(kept)}"), soft_wrap=True)
