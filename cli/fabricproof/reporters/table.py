"""Terminal tables (rich): per-host view, failures, counts, unjudged checks, collection errors.

rich is imported only when a table is built, so importing the reporter registry stays cheap.
Every value goes in as rich Text, never as a markup string: tool output such as "[red]" or
"[/]" is shown as written, not interpreted.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from ..model import Report, Severity
from ..textsafe import visible
from ._common import (
    failures,
    found_lines,
    host_rows,
    not_verified,
    status,
    status_word,
    not_proven_reason,
    summary_phrase,
)
from .base import Reporter

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

DEFAULT_WIDTH = 120

_SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_STATUS_STYLE = {"failed": "bold red", "incomplete": "bold yellow", "not_proven": "bold yellow", "passed": "bold green",
                 "empty": "bold"}
_STATE_STYLE = {"failed": "red", "incomplete": "yellow", "not proven": "yellow", "passed": "green", "no results": "dim"}


def renderables(report: Report) -> list[RenderableType]:
    """The report as rich renderables, in reading order."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    def t(value: str, style: str = "") -> Text:
        return Text(visible(value), style=style)

    out: list[RenderableType] = []
    s = report.summary
    head = Text()
    head.append(status_word(report), style=_STATUS_STYLE[status(report)])
    head.append(f"  {summary_phrase(s)}")
    out.append(head)
    meta = "  ".join(
        f"{label}: {value}"
        for label, value in (
            ("run", report.run_id),
            ("baseline", report.baseline),
            ("at", report.created_at),
            ("fabricproof", report.tool_version),
        )
        if value
    )
    if meta:
        out.append(t(meta, "dim"))

    rows = host_rows(report)
    if rows:
        # Names, states and counts never wrap (a folded "failed/tota l" reads as nothing); why a host was not
        # collected is the Collection errors table's free text, which wraps at spaces.
        hosts = Table(title="Hosts", title_justify="left", expand=False)
        hosts.add_column("host", **_name_column([h.host for h in rows]))
        for col in ("state", "failed/total", "worst", "unjudged"):
            hosts.add_column(col, no_wrap=True)
        for h in rows:
            hosts.add_row(
                t(h.host),
                t(h.state, _STATE_STYLE[h.state]),
                t(f"{h.failed}/{h.total}"),
                t(h.worst.value, _SEVERITY_STYLE[h.worst]) if h.worst else t("-"),
                t(str(h.not_verified)),
            )
        out.append(hosts)

    fails = failures(report)
    if fails:
        # One block per failure rather than a six-column table: the sentences and remediations stay
        # readable at 80 columns (CI logs) instead of folding into one-word cells.
        out.append(Text(f"Failures ({len(fails)})", style="bold"))
        for r in fails:
            block = Table.grid(padding=(0, 2))
            block.add_column(style="dim", no_wrap=True)
            block.add_column(overflow="fold")
            found = found_lines(r)
            rows_ = [("expected", r.expected), *(("found" if k == 0 else "", line) for k, line in enumerate(found))]
            if not r.findings:  # the findings name each failing item; the reason's pointers stay in JSON/SARIF
                rows_.append(("where", r.reason))
            rows_ += [("evidence", ", ".join(r.evidence)), ("action", r.action), ("fix", _prose(r.remediation))]
            for label, value in rows_:
                if value:
                    block.add_row(label, t(value))
            title = Text("✗ ", style=_SEVERITY_STYLE[r.severity])
            title.append(visible(r.check_id), style="bold")
            title.append(f"  {visible(r.host)}  ")
            title.append(r.severity.value, style=_SEVERITY_STYLE[r.severity])
            out.append(title)
            out.append(Padding(block, (0, 0, 1, 4)))

    unjudged = not_verified(report)
    if unjudged:
        # Lines, like failures: two name columns beside a reason leave the reason no room at 80 columns.
        out.append(Text(f"Not verified ({len(unjudged)})", style="bold"))
        for r in unjudged:
            title = Text("? ", style="yellow")
            title.append(visible(r.check_id), style="bold")
            title.append(f"  {visible(r.host)}  ")
            title.append(r.outcome.value, style="yellow")
            out.append(title)
            out.append(Padding(t(r.reason), (0, 0, 0, 4)))

    if report.collection_errors:
        table = Table(title=f"Collection errors ({len(report.collection_errors)})", title_justify="left")
        table.add_column("host", **_name_column(list(report.collection_errors)))
        table.add_column("reason", ratio=1, min_width=30, overflow="fold")
        for host, reason in sorted(report.collection_errors.items()):
            table.add_row(t(host), t(reason, "red"))
        out.append(table)

    if report.not_proven:
        table = Table(title=f"Not proven ({len(report.not_proven)})", title_justify="left")
        table.add_column("host", **_name_column(list(report.not_proven)))
        table.add_column("reason", ratio=1, min_width=30, overflow="fold")
        for host, checks in report.not_proven.items():
            table.add_row(t(host), t(not_proven_reason(checks), "yellow"))
        out.append(table)

    if report.unapplied:
        table = Table(title=f"Unapplied checks ({len(report.unapplied)})", title_justify="left")
        table.add_column("check", **_name_column([c.check_id for c in report.unapplied]))
        table.add_column("reason", ratio=1, min_width=30, overflow="fold")
        for cov in report.unapplied:
            table.add_row(t(cov.check_id), t(cov.reason))
        out.append(table)
    return out


def _prose(text: str) -> str:
    """A catalog text's paragraphs, its YAML line breaks undone: the terminal wraps it at its own width."""
    return "\n".join(" ".join(p.split()) for p in text.split("\n\n"))


#: A name column is as wide as its longest name up to this; longer names (rare) fold rather than squeeze the text.
MAX_NAME_WIDTH = 36


def _name_column(names: list[str]) -> dict[str, object]:
    """Column options for ids and host names: wide enough that no name is cut, unless it is very long."""
    return {"min_width": min(MAX_NAME_WIDTH, max((len(visible(n)) for n in names), default=4)), "overflow": "fold"}


def print_to(console: Console, report: Report) -> None:
    """Print the report on a console the CLI owns (colours when it is a terminal)."""
    for item in renderables(report):
        console.print(item)


def render(report: Report, width: int = DEFAULT_WIDTH) -> str:
    """The tables as plain text, without colour codes, for files and pipes."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        no_color=True,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )
    print_to(console, report)
    return buffer.getvalue()


REPORTER = Reporter(
    name="table",
    extension="txt",
    description="Human-readable tables: hosts, failures, counts, unjudged checks, collection errors.",
    render=render,
)
