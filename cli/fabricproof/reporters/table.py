"""Terminal tables (rich): failures (per host, or rolled up by check above a few dozen hosts), unjudged checks by
cause, collection errors, the hosts, and a closing verdict line.

rich is imported only when a table is built, so importing the reporter registry stays cheap.
Every value goes in as rich Text, never as a markup string: tool output such as "[red]" or
"[/]" is shown as written, not interpreted.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from ..model import Report, Severity
from ..textsafe import visible
from ..words import counted
from ._common import (HostRow, failures, found_lines, found_text, host_rows, not_proven_reason, prose, status,
                      status_word, summary_phrase, why)
from .base import Reporter
from .rollup import (MAX_HOSTS_SHOWN, ROLLUP_HOSTS, by_check, causes, consequence_line, grouped, left_unjudged,
                     unjudged)

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

DEFAULT_WIDTH = 120

_SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_STATUS_STYLE = {"failed": "bold red", "incomplete": "bold yellow", "not_proven": "bold yellow", "passed": "bold green",
                 "empty": "bold"}
_STATE_STYLE = {"failed": "red", "incomplete": "yellow", "not proven": "yellow", "passed": "green", "no results": "dim"}


def renderables(report: Report, per_host: bool | None = None) -> list[RenderableType]:
    """The report as rich renderables, in reading order: the verdict, what failed, what could not be judged, the
    hosts, and the verdict again. per_host: list every host and every failure on it (None: when the fleet has at
    most rollup.ROLLUP_HOSTS hosts); otherwise failures roll up by check and the hosts table is left out."""
    from rich.text import Text

    rows = host_rows(report)
    if per_host is None:
        per_host = len(rows) <= ROLLUP_HOSTS
    out: list[RenderableType] = [_verdict(report)]
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
        out.append(_t(meta, "dim"))
    out += _failures_per_host(report) if per_host else _failures_by_check(report)
    out += _unjudged(report)
    out += _lost(report, per_host)
    if report.unapplied:
        table = _reason_table(f"Unapplied checks ({len(report.unapplied)})", "check",
                              grouped((c.check_id, c.reason) for c in report.unapplied), "", len(report.unapplied))
        out.append(table)
    if per_host and rows:
        out.append(_hosts(rows))
    elif rows:
        out.append(_t(f"{counted(len(rows), 'host')} in this run: validate --hosts (or -v) lists each one.", "dim"))
    if report.results or report.collection_errors:  # the verdict once more, where a long report ends
        out.append(Text(""))
        out.append(_verdict(report))
    return out


def _t(value: str, style: str = "") -> Text:
    from rich.text import Text

    return Text(visible(value), style=style)


def _verdict(report: Report) -> Text:
    from rich.text import Text

    head = Text()
    head.append(status_word(report), style=_STATUS_STYLE[status(report)])
    head.append(f"  {summary_phrase(report.summary)}")
    return head


def _hosts(rows: list[HostRow]) -> RenderableType:
    from rich.table import Table

    # Names, states and counts never wrap (a folded "failed/tota l" reads as nothing).
    hosts = Table(title="Hosts", title_justify="left", expand=False)
    hosts.add_column("host", **_name_column([h.host for h in rows]))
    for col in ("state", "failed/total", "worst", "unjudged"):
        hosts.add_column(col, no_wrap=True)
    for h in rows:
        hosts.add_row(
            _t(h.host),
            _t(h.state, _STATE_STYLE[h.state]),
            _t(f"{h.failed}/{h.total}"),
            _t(h.worst.value, _SEVERITY_STYLE[h.worst]) if h.worst else _t("-"),
            _t(str(h.not_verified)),
        )
    return hosts


def _title(mark: str, check_id: str, severity: Severity, *rest: str) -> Text:
    from rich.text import Text

    title = Text(f"{mark} ", style=_SEVERITY_STYLE[severity])
    title.append(visible(check_id), style="bold")
    for part in rest:
        title.append(f"  {visible(part)}")
    title.append("  ")
    title.append(severity.value, style=_SEVERITY_STYLE[severity])
    return title


def _failures_per_host(report: Report) -> list[RenderableType]:
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    fails = failures(report)
    if not fails:
        return []
    # One block per failure rather than a six-column table: the sentences and remediations stay readable at 80
    # columns (CI logs) instead of folding into one-word cells. Failures that follow from another on the same item
    # (a port Disabled is also Down) are listed in its block.
    out: list[RenderableType] = [Text(f"Failures ({len(fails)})", style="bold")]
    for c in causes(fails):
        r = c.result
        block = Table.grid(padding=(0, 2))
        block.add_column(style="dim", no_wrap=True)
        block.add_column(overflow="fold")
        found = found_lines(r)
        rows_ = [("expected", r.expected), *(("found" if k == 0 else "", line) for k, line in enumerate(found))]
        rows_.append(("where", why(r)))  # the reason's pointers stay in JSON and SARIF's properties
        if c.consequences:
            rows_.append(("and so", consequence_line(c)))
        rows_ += [("evidence", ", ".join(r.evidence)), ("action", r.action), ("fix", prose(r.remediation))]
        for label, value in rows_:
            if value:
                block.add_row(label, _t(value))
        out.append(_title("✗", r.check_id, r.severity, r.host))
        out.append(Padding(block, (0, 0, 1, 4)))
    return out


#: Lines of findings shown per host in the roll-up by check (the per-host view shows findings.MAX_FINDINGS).
FLEET_FINDINGS = 3


def _failures_by_check(report: Report) -> list[RenderableType]:
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    checks = by_check(report)
    if not checks:
        return []
    s = report.summary
    out: list[RenderableType] = [Text(f"Failures by check ({counted(len(checks), 'check')}; {s.failed} failed on "
                                      f"{counted(s.hosts_failed, 'host')})", style="bold")]
    for cf in checks:
        led = f"  as a consequence of {', '.join(cf.as_consequence)}" if not cf.by_expected else ""
        out.append(_title("✗", cf.check_id, cf.severity, counted(cf.hosts, "host") + led))
        if not cf.by_expected:  # every failure of it is listed under its cause's check
            out.append(Text(""))
            continue
        block = Table.grid(padding=(0, 2))
        hosts = [c.result.host for cs in cf.by_expected.values() for c in cs[:MAX_HOSTS_SHOWN]]
        block.add_column(style="dim", **_name_column(["expected", *hosts]))
        block.add_column(overflow="fold")
        for expected, group in cf.by_expected.items():
            block.add_row("expected", _t(expected))
            for c in group[:MAX_HOSTS_SHOWN]:
                # a fleet check's reason says against whom ("8 duplicate value(s) ..."); a pointer's, nothing more
                lines = found_lines(c.result, FLEET_FINDINGS) if c.result.findings else [why(c.result) or
                                                                                         found_text(c.result)]
                for k, line in enumerate(lines):
                    block.add_row(_t(c.result.host, "") if k == 0 else "", _t(line))
                if c.consequences:
                    block.add_row("", _t(f"and so: {consequence_line(c)}"))
            if len(group) > MAX_HOSTS_SHOWN:
                block.add_row("", _t(f"(+{len(group) - MAX_HOSTS_SHOWN} more hosts: the JSON report, or --hosts)"))
        for label, value in (("action", cf.action), ("fix", prose(cf.remediation))):
            if value:
                block.add_row(label, _t(value))
        out.append(Padding(block, (0, 0, 1, 4)))
    return out


def _unjudged(report: Report) -> list[RenderableType]:
    from rich.padding import Padding
    from rich.text import Text

    groups = unjudged(report)
    if not groups:
        return []
    n = sum(u.count for u in groups)
    # One line per cause: a hung tool or a lost host leaves many checks unjudged for one reason.
    out: list[RenderableType] = [Text(f"Not verified ({n})", style="bold")]
    for u in groups:
        line = Text("? ", style="yellow")
        line.append(f"{u.outcome.value}: ", style="yellow")
        line.append(visible(u.reason))
        out.append(line)
        out.append(Padding(_t(left_unjudged(u)), (0, 0, 0, 4)))
    return out


def _lost(report: Report, per_host: bool) -> list[RenderableType]:
    """Hosts not collected and hosts not proven; rolled up by reason when the hosts are not listed one by one."""
    out: list[RenderableType] = []
    if report.collection_errors:
        rows = sorted(report.collection_errors.items())
        out.append(_reason_table(f"Collection errors ({len(rows)})", "host",
                                 [((h,), why) for h, why in rows] if per_host else grouped(rows), "red"))
    if report.not_proven:
        rows = [(h, not_proven_reason(c)) for h, c in report.not_proven.items()]
        out.append(_reason_table(f"Not proven ({len(rows)})", "host",
                                 [((h,), why) for h, why in rows] if per_host else grouped(rows), "yellow"))
    return out


def _reason_table(title: str, noun: str, rows: list[tuple[tuple[str, ...], str]], style: str,
                  limit: int = MAX_HOSTS_SHOWN) -> RenderableType:
    """Names beside the reason they share: one row per reason, its names listed (hosts cut after `limit`)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column(noun, **_name_column([n for names, _ in rows for n in names[:limit]]))
    table.add_column("reason", ratio=1, min_width=30, overflow="fold")
    for names, reason in rows:
        shown = "\n".join(names[:limit])
        if len(names) > limit:
            shown += f"\n(+{len(names) - limit} more)"
        table.add_row(_t(shown), _t(reason, style))
    return table


#: A name column is as wide as its longest name up to this; longer names (rare) fold rather than squeeze the text.
#: Check ids are at most 40 characters (the longest today: fabric.health_incorrect_configuration, 37), so none folds.
MAX_NAME_WIDTH = 40


def _name_column(names: list[str]) -> dict[str, object]:
    """Column options for ids and host names: wide enough that no name is cut, unless it is very long."""
    return {"min_width": min(MAX_NAME_WIDTH, max((len(visible(n)) for n in names), default=4)), "overflow": "fold"}


def print_to(console: Console, report: Report, per_host: bool | None = None) -> None:
    """Print the report on a console the CLI owns (colours when it is a terminal)."""
    for item in renderables(report, per_host):
        console.print(item)


def render(report: Report, width: int = DEFAULT_WIDTH, per_host: bool | None = None) -> str:
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
    print_to(console, report, per_host)
    return buffer.getvalue()


REPORTER = Reporter(
    name="table",
    extension="txt",
    description="Human-readable tables: failures (by check at fleet size), unjudged checks by cause, hosts, counts.",
    render=render,
)
