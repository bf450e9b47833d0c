"""What the rollout, rollback and runbook commands share: progress lines, and the decision log they end with."""

from __future__ import annotations

from pathlib import Path

import typer

from ..rollout import decisions
from ..rollout import state as st
from ._common import err_console, shown


def say(msg: str) -> None:
    """One progress line on stderr, escaped (host and plan text is never markup) and soft-wrapped."""
    err_console.print(shown(msg), soft_wrap=True)


def finish_run(code: int, runs_dir: Path, run_id: str) -> None:
    """Print the run's decision log (the story an auditor reads) and exit with the run's code."""
    run_dir = Path(runs_dir) / run_id
    say(f"decision log {run_dir / decisions.DECISIONS_FILE}:")
    for d in decisions.read(run_dir):
        err_console.print("  " + shown(decisions.format_line(d)), soft_wrap=True)
    status = st.RunState.load(run_dir).status
    say(f"run {run_id}: {status} (exit {int(code)})")
    raise typer.Exit(int(code))
