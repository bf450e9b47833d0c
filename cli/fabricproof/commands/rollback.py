"""`fabricproof rollback RUN`: put back the hosts a rollout changed, newest wave first, and prove the before-baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..model import ExitCode
from ..rollout import runs
from ..rollout import state as st
from ._common import input_errors
from ._runlog import finish_run, progress

EPILOG = ("Exit codes: 0 rolled back and proven (or nothing to roll back) · 2 bad input · 5 some hosts do not prove "
          "the before-baseline and stay drained for an operator · 6 the run's state could not be written (disk full, "
          "I/O error) · 130 interrupted.")


@input_errors
def rollback(
    run: Annotated[str, typer.Argument(help="Run id, its directory, or 'last'.", show_default=False)],
    limit: Annotated[str | None, typer.Option("--limit", "-l", help="Ansible host pattern: roll back only these.")] = None,
    runs_dir: Annotated[Path, typer.Option("--runs-dir", help="Where runs are kept.")] = Path("runs"),
) -> None:
    """Roll back a rollout run: every host it changed (or --limit), in reverse wave order, with the plan's rollback
    playbook, then prove the before-baseline on them. Works on finished, halted, aborted and interrupted runs.

    Example: fabricproof rollback last --limit 'h100-0003'
    """
    state = st.find_run(runs_dir, run)
    runs_dir = state.dir.parent  # RUN may be the run's path: its runs dir is where it lives
    code, state = runs.rollback(runs_dir, state.run_id, limit=limit, progress=progress)
    if code == ExitCode.ROLLED_BACK:  # the rollback asked for is done and proven: success for this command
        code = ExitCode.OK
    finish_run(code, runs_dir, state.run_id)
