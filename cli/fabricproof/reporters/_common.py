"""Text helpers every reporter shares: values as text, run status, per-host rows, ordering."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..judging.findings import found_sentence
from ..model import Outcome, Report, Result, Severity, Summary
from ..words import counted

STATUS_WORDS = {
    "failed": "FAILED",
    "incomplete": "INCOMPLETE",
    "not_proven": "NOT PROVEN",
    "passed": "PASSED",
    "empty": "NO RESULTS",
}


def format_actual(value: Any) -> str:
    """The observed value as text: strings verbatim, None as empty, the rest as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str, separators=(", ", ": "))


#: Findings listed per failure in reports for people; JSON and SARIF keep every one.
MAX_FINDINGS = 8


def found_lines(result: Result, limit: int = MAX_FINDINGS) -> list[str]:
    """What a failure found, as people read it: one line per failing item named by what it is ("GPU 1: 16 of 18
    links active"), or the value found when the check judges one value."""
    if not result.findings:
        return [format_actual(result.actual)] if result.actual is not None else []
    lines = [f.line for f in result.findings[:limit]]
    if len(result.findings) > limit:
        lines.append(f"(+{len(result.findings) - limit} more)")
    return lines


def found_text(result: Result, limit: int = MAX_FINDINGS) -> str:
    """What a failure found, readable without its expectation beside it (a JUnit message, a Markdown row): the
    failing items named ("GPU 1: 16 of 18 links active; ..."), else the value found as a sentence."""
    if result.findings:
        return "; ".join(found_lines(result, limit))
    if result.actual is None:
        return result.reason
    return found_sentence(result.expected, result.actual)


def why(result: Result) -> str:
    """The reason beside what was found, when it adds to it: not when the failing items are named (the reason lists
    their pointers) nor when it only restates the value at its pointer ("/fm/build/version = 535.104.05")."""
    return "" if result.findings or result.reason.startswith("/") else result.reason


def prose(text: str) -> str:
    """A catalog text's paragraphs, its YAML line breaks undone: the reader's width wraps it (a terminal, a table)."""
    return "\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def sentence(text: str) -> str:
    """text stripped and ending in sentence punctuation, so it can be followed by another."""
    text = text.strip()
    return text if not text or text[-1] in ".!?" else text + "."


def family_of(result: Result) -> str:
    """The check family; catalog ids are dotted with the family first (nvlink.links_active)."""
    return result.family or result.check_id.split(".", 1)[0]


def status(report: Report) -> str:
    """failed | incomplete | not_proven | passed | empty: the one word a run is summed up by.

    Failures outrank incompleteness; a host whose hardware's checks had no baseline value is not proven;
    a run that evaluated nothing and lost no host is empty, never passed, because it proved nothing.
    """
    s = report.summary
    if s.failed:
        return "failed"
    if s.errors or s.unknown or report.collection_errors:
        return "incomplete"
    if report.not_proven:
        return "not_proven"
    if s.total == 0:
        return "empty"
    return "passed"


def status_word(report: Report) -> str:
    return STATUS_WORDS[status(report)]


def summary_phrase(summary: Summary) -> str:
    """Counts as one sentence fragment, e.g. '2 failed (1 critical, 1 warning), 5 passed, ...'."""
    by_sev = ", ".join(
        f"{summary.failed_by_severity[sev.value]} {sev.value}"
        for sev in Severity
        if summary.failed_by_severity.get(sev.value)
    )
    failed = f"{summary.failed} failed" + (f" ({by_sev})" if by_sev else "")
    parts = [
        failed,
        f"{summary.passed} passed",
        f"{summary.skipped} skipped",
        f"{summary.unknown} unknown",
        counted(summary.errors, "error"),
    ]
    hosts = f"{counted(summary.hosts, 'host')}, {summary.hosts_failed} with failures"
    if summary.hosts_not_proven:
        hosts += f", {summary.hosts_not_proven} not proven"
    return f"{', '.join(parts)}; {hosts}"


def not_proven_reason(checks: tuple[str, ...] | list[str], limit: int = MAX_FINDINGS) -> str:
    """Why a host is not proven, one line: the checks its hardware needs that had no baseline value."""
    more = f" (+{len(checks) - limit} more)" if len(checks) > limit else ""
    return (f"{len(checks)} check(s) its hardware needs had no baseline value (a baseline group that selects "
            f"none of its groups?): {', '.join(checks[:limit])}{more}")


def by_severity(results: list[Result] | tuple[Result, ...]) -> list[Result]:
    """Worst first, then by check id and host, so the same report always reads the same."""
    return sorted(results, key=lambda r: (-r.severity.rank, r.check_id, r.host))


def failures(report: Report) -> list[Result]:
    return by_severity([r for r in report.results if r.outcome is Outcome.FAIL])


def not_verified(report: Report) -> list[Result]:
    """Results that could not be judged (collector error, missing fact)."""
    return sorted(
        (r for r in report.results if r.outcome in (Outcome.ERROR, Outcome.UNKNOWN)),
        key=lambda r: (r.outcome.value, r.check_id, r.host),
    )


@dataclass(frozen=True)
class HostRow:
    """One host's line in a per-host view."""

    host: str
    total: int
    failed: int
    passed: int
    not_verified: int  # error + unknown
    skipped: int
    worst: Severity | None  # worst severity among failures
    collection_error: str  # why collection failed on this host, "" if it did not
    not_proven: tuple[str, ...] = ()  # checks its hardware needs that had no baseline value

    @property
    def state(self) -> str:
        if self.failed:
            return "failed"
        if self.collection_error or self.not_verified:
            return "incomplete"
        if self.not_proven:
            return "not proven"
        if self.total == 0:
            return "no results"
        return "passed"


def host_rows(report: Report) -> list[HostRow]:
    """Every host in scope, plus any host that only appears in results or collection errors."""
    order: dict[str, None] = dict.fromkeys(report.hosts)
    for r in report.results:
        order.setdefault(r.host)
    for h in report.collection_errors:
        order.setdefault(h)
    by_host: dict[str, list[Result]] = {host: [] for host in order}
    for r in report.results:  # one pass: a 10,000-host report holds a million results
        by_host[r.host].append(r)
    rows = []
    for host, mine in by_host.items():
        failed = [r for r in mine if r.outcome is Outcome.FAIL]
        rows.append(
            HostRow(
                host=host,
                total=len(mine),
                failed=len(failed),
                passed=sum(r.outcome is Outcome.PASS for r in mine),
                not_verified=sum(r.outcome in (Outcome.ERROR, Outcome.UNKNOWN) for r in mine),
                skipped=sum(r.outcome is Outcome.SKIP for r in mine),
                worst=max((r.severity for r in failed), key=lambda s: s.rank, default=None),
                collection_error=report.collection_errors.get(host, ""),
                not_proven=report.not_proven.get(host, ()),
            )
        )
    return rows


def parse_time(text: str) -> datetime | None:
    """created_at as an aware UTC datetime; None when empty or not ISO 8601 (never invented)."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:  # the run records UTC; a naive stamp is taken as UTC
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)
