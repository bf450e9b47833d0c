"""What the rollout, rollback and runbook commands share: progress lines, and the decision log they end with."""

from __future__ import annotations

from pathlib import Path

import typer

from ..fsutil import atomic_write_text
from ..rollout import decisions
from ..rollout import state as st
from ..rollout.store import RolloutStore
from ..timeutil import utc_now
from ._common import err_console, shown


def say(msg: str) -> None:
    """One progress line on stderr, escaped (host and plan text is never markup) and soft-wrapped."""
    err_console.print(shown(msg), soft_wrap=True)


def progress(msg: str) -> None:
    """A progress line of a running rollout or runbook, its UTC time first ("06:41:07Z  pilot: 1 host(s)"): a gate
    that retries or a soak that waits shows where the time goes, and the line matches its decision's `when`."""
    say(f"{stamp()}  {msg}")


def stamp() -> str:
    """HH:MM:SSZ of now, as the decision log's `when` ends."""
    return utc_now()[11:]


def report_page(run_dir: Path) -> str:
    """The rollout report of a run directory: one self-contained HTML page."""
    from ..reporters import rollout_html
    from ..rollout import view

    return rollout_html.render(view.build(run_dir))


def write_report(run_dir: Path) -> Path | None:
    """RUN_DIR/rollout.html, drawn again each time a command leaves the run, so whoever opens the run directory
    during an incident finds the page `rollout status RUN -f html` shows. None (and a warning) if it cannot be
    drawn: the report is a view of the run, and failing to draw it must not change the run's exit code."""
    page = RolloutStore(run_dir).page_path
    try:
        atomic_write_text(page, report_page(run_dir), mode=st.FILE_MODE)
    except Exception as exc:  # noqa: BLE001 - any failure to draw the view, reported and survived
        err_console.print(f"[yellow]warning:[/] rollout report not written: {shown(f'{type(exc).__name__}: {exc}')}",
                          soft_wrap=True)
        return None
    return page


def finish_run(code: int, runs_dir: Path, run_id: str) -> None:
    """Write the run's report, print its decision log (the story an auditor reads) and exit with the run's code."""
    run_dir = Path(runs_dir) / run_id
    page = write_report(run_dir)
    print_decision_log(run_dir)
    status = st.RunState.load(run_dir).status
    if page is not None:
        say(f"rollout report {page}")
    say(f"run {run_id}: {status} (exit {int(code)})")
    raise typer.Exit(int(code))


#: Unreadable lines shown on a terminal; `rollout status RUN -f json` lists every one.
UNREADABLE_SHOWN = 20


def decision_log_notes(log: decisions.Log, path: Path) -> list[str]:
    """What an operator must know about a decision log besides its records: lines that are not records (by number)
    and torn tails set aside beside it."""
    out = []
    if log.unreadable:
        out.append(f"{len(log.unreadable)} unreadable line(s) in {path} (kept there, not decisions):")
        out += ["  " + decisions.format_unreadable(u) for u in log.unreadable[:UNREADABLE_SHOWN]]
        if len(log.unreadable) > UNREADABLE_SHOWN:
            out.append(f"  (+{len(log.unreadable) - UNREADABLE_SHOWN} more: `rollout status RUN -f json` lists all)")
    if log.set_aside:
        out.append(f"torn last line(s) set aside beside {path.name}, kept as they were: {', '.join(log.set_aside)}")
    return out


def print_decision_log(run_dir: Path) -> None:
    """The run's decision log on stderr: the story an auditor reads, and what in the file is not part of it."""
    path = decisions.path_of(run_dir)
    log = decisions.read_log(run_dir)
    say(f"decision log {path}:")
    for d in log.records:
        err_console.print("  " + shown(decisions.format_line(d)), soft_wrap=True)
    for note in decision_log_notes(log, path):
        say(note)
