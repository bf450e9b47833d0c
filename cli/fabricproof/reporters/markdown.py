"""GitHub-flavoured Markdown for CI step summaries ($GITHUB_STEP_SUMMARY): status, failures in full (one row per cause,
its items named), unjudged checks by cause, passes and skips as counts per check; under 1 MiB at any fleet size."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from ..actions import host_actions
from ..judging.findings import counted_reasons
from ..model import Outcome, Report, Result
from ..textsafe import visible
from ._common import failures, found_text, host_rows, not_proven_reason, prose, status_word, summary_phrase
from .base import Reporter
from .rollup import causes, consequence_line, grouped, named, unjudged

# Punctuation with inline meaning in a GFM table cell (emphasis, code, links, strikethrough,
# the cell separator); a backslash makes each literal. Block syntax (#, -, >) cannot start
# inside a cell, and < > & are turned into entities so no text becomes an HTML tag.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def cell(text: str) -> str:
    """Text safe inside a table cell: markup and pipes escaped, HTML neutralised, newlines as <br>."""
    text = visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return "<br>".join(text.splitlines())


#: GitHub drops a step summary over 1 MiB (1,048,576 bytes); rows stop short of it with a line saying how many more
#: there are, so a fleet of any size keeps its summary.
MAX_BYTES = 1_000_000
#: Hosts named per unjudged cause (every one is in the JSON report).
MAX_NAMES = 50


class _Budget:
    """The bytes left for the document; a table stops adding rows when they are spent."""

    def __init__(self, total: int = MAX_BYTES) -> None:
        self.left = total

    def take(self, lines: list[str]) -> list[str]:
        self.left -= sum(len(line.encode()) + 1 for line in lines)
        return lines


def _table(header: list[str], rows: Iterable[list[str]], budget: _Budget, total: int | None = None) -> list[str]:
    """A table of `rows` while the budget lasts (keeping room for what follows), then one row saying how many more."""
    lines = budget.take(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)])
    shown = 0
    for row in rows:
        line = "| " + " | ".join(cell(c) for c in row) + " |"
        if budget.left - len(line.encode()) < _RESERVE:
            break
        lines += budget.take([line])
        shown += 1
    if total is not None and shown < total:
        lines += budget.take(["| " + " | ".join([f"(+{total - shown} more: the JSON report has every one)"]
                                                + [""] * (len(header) - 1)) + " |"])
    return lines


#: Bytes kept for the sections after a cut table (headings, counts): each is small and bounded by the catalog.
_RESERVE = 64 * 1024


def _failure_rows(report: Report) -> tuple[list[list[str]], int]:
    """One row per cause: the check, the host, what it found (items named), the failures that follow from it."""
    found = causes(failures(report))
    rows = []
    for c in found:
        r = c.result
        text = found_text(r)
        if c.consequences:
            text += f"\nand so: {consequence_line(c)}"
        rows.append([r.check_id, r.host, r.severity.value, text, r.action])
    return rows, len(found)


def _check_rows(report: Report) -> list[list[str]]:
    """Per check, its counts: passes and skips as numbers, never one row per host."""
    counts: dict[str, dict[Outcome, int]] = {}
    first: dict[str, Result] = {}
    skipped: dict[str, Counter[str]] = {}
    for r in report.results:
        first.setdefault(r.check_id, r)
        n = counts.setdefault(r.check_id, dict.fromkeys(Outcome, 0))
        n[r.outcome] += 1
        if r.outcome is Outcome.SKIP:
            skipped.setdefault(r.check_id, Counter())[r.reason] += 1
    rows = []
    for check_id, r in sorted(first.items(), key=lambda kv: (-kv[1].severity.rank, kv[0])):
        n = counts[check_id]
        why = counted_reasons(skipped[check_id]) if check_id in skipped else ""
        rows.append([check_id, r.severity.value, str(n[Outcome.PASS]), str(n[Outcome.FAIL]),
                     str(n[Outcome.ERROR] + n[Outcome.UNKNOWN]), str(n[Outcome.SKIP]), why])
    return rows


def render(report: Report) -> str:
    budget = _Budget()
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
    budget.take(lines)

    fails = failures(report)
    if fails:
        rows, total = _failure_rows(report)
        lines += budget.take(["", f"### Failures ({len(fails)})", ""])
        lines += _table(["Check", "Host", "Severity", "Found", "Action"], rows, budget, total)
        # What each failing check expects and its fix, once per check rather than on every host's row.
        expected: dict[str, dict[str, None]] = {}
        first: dict[str, Result] = {}
        for r in fails:
            first.setdefault(r.check_id, r)
            expected.setdefault(r.check_id, {})[r.expected] = None
        lines += budget.take(["", f"### What the failing checks expect ({len(first)})", ""])
        lines += _table(["Check", "Expected", "Remediation"],
                        ([cid, "\n".join(expected[cid]), prose(r.remediation)] for cid, r in first.items()), budget,
                        len(first))
    unjudged_ = unjudged(report)
    if unjudged_:
        lines += budget.take(["", f"### Not verified ({sum(u.count for u in unjudged_)})", ""])
        lines += _table(["Reason", "Outcome", "Hosts", "Checks"],
                        ([u.reason, u.outcome.value, f"{len(u.hosts)}: {named(u.hosts, MAX_NAMES)}",
                          f"{len(u.checks)}: {named(u.checks, len(u.checks))}"] for u in unjudged_),
                        budget, len(unjudged_))
    for title, rows in (
        ("Collection errors", sorted(report.collection_errors.items())),
        ("Not proven", [(h, not_proven_reason(c)) for h, c in report.not_proven.items()]),
    ):
        if rows:
            reasons = grouped(rows)
            lines += budget.take(["", f"### {title} ({len(rows)})", ""])
            lines += _table(["Hosts", "Reason"], ([named(h, MAX_NAMES), why] for h, why in reasons), budget,
                            len(reasons))
    if report.unapplied:
        reasons = grouped((c.check_id, c.reason) for c in report.unapplied)
        lines += budget.take(["", f"### Checks that applied to no host ({len(report.unapplied)})", ""])
        lines += _table(["Checks", "Reason"], ([", ".join(ids), why] for ids, why in reasons), budget, len(reasons))

    rows = [h for h in host_rows(report) if h.state != "passed"]
    actions = host_actions(report.results)
    if rows:
        lines += budget.take(["", f"### Hosts that did not pass ({len(rows)} of {report.summary.hosts})", ""])
        lines += _table(
            ["Host", "State", "Failed", "Results", "Worst severity", "Action"],
            ([h.host, h.state, str(h.failed), str(h.total), h.worst.value if h.worst else "", actions.get(h.host, "")]
             for h in rows), budget, len(rows))
    # Passes and skips matter for audits but drown the failures: counted per check, folded (GitHub renders
    # <details> closed); the JSON report lists every one.
    checks = _check_rows(report)
    if checks:
        lines += ["", f"<details><summary>Checks ({len(checks)}: passed and skipped as counts)</summary>", ""]
        lines += _table(["Check", "Severity", "Passed", "Failed", "Not verified", "Skipped", "Skipped because"],
                        checks, _Budget(budget.left + _RESERVE), len(checks))
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


REPORTER = Reporter(
    name="markdown",
    extension="md",
    description="Markdown for CI step summaries: status line, failures in full, passes counted per check.",
    render=render,
)
