"""Collection progress on stderr: a rich bar on a terminal, plain lines in CI logs, nothing with --quiet."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..collect import CollectResult, HostProgress, collect
from ..model import Host
from ._common import shown

#: Plain mode prints a status line at every 10 % and at least this often.
PLAIN_EVERY_S = 10.0


def status_line(ev: HostProgress, label: str = "collect") -> str:
    rate = ev.done / ev.elapsed_s if ev.elapsed_s > 0 else 0.0
    return (f"{label}: {ev.done}/{ev.total} hosts, {ev.failed} not collected, {ev.partial} with collector errors, "
            f"{rate:.1f} hosts/s, {ev.elapsed_s:.1f} s")


def host_line(ev: HostProgress) -> str | None:
    """The line worth printing for one host, or None for a clean one."""
    if ev.status == "failed":
        return f"{ev.host}: not collected: {ev.message}"
    if ev.status == "partial":
        return f"{ev.host}: collector errors: {ev.message}"
    return None


class ProgressView:
    """A HostProgress callback (use as a context manager). Calls arrive one at a time from collect()."""

    def __init__(self, console: Console, total: int, label: str = "collect", quiet: bool = False):
        self.console = console
        self.total = total
        self.label = label
        self.quiet = quiet
        self.fancy = console.is_terminal and not quiet
        self._bar: Progress | None = None
        self._task = None
        self._next_pct = 10
        self._last_line = time.monotonic()

    def __enter__(self) -> ProgressView:
        if self.fancy:
            self._bar = Progress(
                TextColumn(f"[bold]{shown(self.label)}[/]"), BarColumn(), MofNCompleteColumn(),
                TextColumn("hosts · [red]{task.fields[failed]} not collected[/] · "
                           "[yellow]{task.fields[partial]} partial[/] · {task.fields[rate]}"),
                TimeElapsedColumn(), console=self.console, transient=True)
            self._task = self._bar.add_task(self.label, total=self.total, failed=0, partial=0, rate="")
            self._bar.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, ev: HostProgress) -> None:
        if self.quiet:
            return
        line = host_line(ev)
        if self._bar is not None and self._task is not None:
            if line:
                style = "red" if ev.status == "failed" else "yellow"
                self._bar.console.print(f"[{style}]{shown(line)}[/]", soft_wrap=True, highlight=False)
            rate = f"{ev.done / ev.elapsed_s:.1f} hosts/s" if ev.elapsed_s > 0 else ""
            self._bar.update(self._task, completed=ev.done, failed=ev.failed, partial=ev.partial, rate=rate)
            return
        if line:
            self.console.print(shown(line), soft_wrap=True, highlight=False)
        pct = ev.done * 100 // max(1, ev.total)
        now = time.monotonic()
        if pct >= self._next_pct or now - self._last_line >= PLAIN_EVERY_S or ev.done == ev.total:
            self.console.print(shown(status_line(ev, self.label)), soft_wrap=True, highlight=False)
            self._last_line = now
            while self._next_pct <= pct:
                self._next_pct += 10


def collect_with_progress(hosts: Sequence[Host], run_dir: Path, *, quiet: bool = False, label: str = "collect",
                          **settings: Any) -> CollectResult:
    """collect() with its progress shown on stderr (a bar on a terminal, status lines in CI logs)."""
    from ._common import err_console

    with ProgressView(err_console, len(hosts), label, quiet=quiet) as view:
        return collect(hosts, run_dir, progress=view, **settings)
