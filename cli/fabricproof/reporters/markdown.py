"""GitHub-flavoured Markdown for CI step summaries ($GITHUB_STEP_SUMMARY): status, failures, passes."""

from __future__ import annotations

import re

from ..actions import host_actions
from ..model import Outcome, Report, Result
from ..textsafe import visible
from ._common import (
    by_severity,
    failures,
    format_actual,
    host_rows,
    not_verified,
    status_word,
    not_proven_reason,
    summary_phrase,
)
from .base import Reporter

# Punctuation with inline meaning in a GFM table cell (emphasis, code, links, strikethrough,
# the cell separator); a backslash makes each literal. Block syntax (#, -, >) cannot start
# inside a cell, and < > & are turned into entities so no text becomes an HTML tag.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def cell(text: str) -> str:
    """Text safe inside a table cell: markup and pipes escaped, HTML neutralised, newlines as <br>."""
    text = visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return "<br>".join(text.splitlines())


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return lines


def _result_row(r: Result) -> list[str]:
    return [r.check_id, r.host, r.severity.value, r.expected, format_actual(r.actual), r.action, r.remediation]


def render(report: Report) -> str:
    s = report.summary
    word = status_word(report)
    lines = [f"## fabricproof: {word}", "", f"**{word}**: {cell(summary_phrase(s))}."]
    meta = [
        f"{label}: {cell(value)}"
        for label, value in (
            ("run", report.run_id),
            ("baseline", report.baseline),
            ("at", report.created_at),
            ("fabricproof", report.tool_version),
        )
        if value
    ]
    if meta:
        lines += ["", " · ".join(meta)]

    fails = failures(report)
    if fails:
        lines += ["", f"### Failures ({len(fails)})", ""]
        lines += _table(
            ["Check", "Host", "Severity", "Expected", "Actual", "Action", "Remediation"],
            [_result_row(r) for r in fails],
        )
    unjudged = not_verified(report)
    if unjudged:
        lines += ["", f"### Not verified ({len(unjudged)})", ""]
        lines += _table(
            ["Check", "Host", "Outcome", "Reason"],
            [[r.check_id, r.host, r.outcome.value, r.reason] for r in unjudged],
        )
    if report.collection_errors:
        lines += ["", f"### Collection errors ({len(report.collection_errors)})", ""]
        lines += _table(["Host", "Reason"], [[h, reason] for h, reason in sorted(report.collection_errors.items())])
    if report.not_proven:
        lines += ["", f"### Not proven ({len(report.not_proven)})", ""]
        lines += _table(["Host", "Reason"], [[h, not_proven_reason(c)] for h, c in report.not_proven.items()])
    if report.unapplied:
        lines += ["", f"### Checks that applied to no host ({len(report.unapplied)})", ""]
        lines += _table(["Check", "Reason"], [[c.check_id, c.reason] for c in report.unapplied])

    rows = host_rows(report)
    actions = host_actions(report.results)
    if rows:
        lines += ["", "### Hosts", ""]
        lines += _table(
            ["Host", "State", "Failed", "Results", "Worst severity", "Action"],
            [[h.host, h.state, str(h.failed), str(h.total), h.worst.value if h.worst else "", actions.get(h.host, "")]
             for h in rows],
        )

    # Passes and skips matter for audits but drown the failures; GitHub renders <details> folded.
    for outcome, label in ((Outcome.PASS, "Passed"), (Outcome.SKIP, "Skipped")):
        group = by_severity([r for r in report.results if r.outcome is outcome])
        if not group:
            continue
        lines += ["", f"<details><summary>{label} ({len(group)})</summary>", ""]
        if outcome is Outcome.PASS:
            lines += _table(["Check", "Host", "Severity", "Expected", "Actual"], [_result_row(r)[:5] for r in group])
        else:
            lines += _table(["Check", "Host", "Reason"], [[r.check_id, r.host, r.reason] for r in group])
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


REPORTER = Reporter(
    name="markdown",
    extension="md",
    description="Markdown for CI step summaries: status line, failures table, passes folded.",
    render=render,
)
