"""The drain breaker's options, shared by `check --local --drain` and `fabricproof breaker`."""

from __future__ import annotations

from typing import Annotated

import typer

LimitOpt = Annotated[str, typer.Option(
    "--breaker", envvar="FABRICPROOF_BREAKER", help="Drain breaker: --drain drains only while fewer than this share "
    "of the node's partitions (10%, rounded down, at least one node) or count of nodes (6) were drained by "
    "fabricproof in the window; past it the node is reported and left in service until `fabricproof breaker "
    "reset`.")]
WindowOpt = Annotated[str, typer.Option(
    "--breaker-window", envvar="FABRICPROOF_BREAKER_WINDOW", help="The drain breaker's window: drains older than "
    "this are not counted (1h, 30m, seconds).")]
