"""JUnit XML: one testsuite per check family, one testcase per (check, host), for CI test views.

Mapping: fail -> <failure message=what was found type=severity>; error -> <error>; skip and unknown ->
<skipped message=reason> (unknown prefixed "unknown: "). Hosts whose collection failed get an
<error> testcase in a "collection" suite, hosts not proven (checks their hardware needs had no baseline
value) one in a "not_proven" suite, and checks that applied to no host a <skipped> testcase in a "coverage"
suite, so none of them disappears from a CI dashboard.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable

from ..model import Outcome, Report, Result
from ..textsafe import visible
from ._common import family_of, found_lines, found_text, not_proven_reason, parse_time, why
from .base import Reporter

COLLECTION_SUITE = "collection"
COVERAGE_SUITE = "coverage"
NOT_PROVEN_SUITE = "not_proven"
_COUNTERS = ("tests", "failures", "errors", "skipped")


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: visible(v) for k, v in attrs.items()})
    if text is not None:
        el.text = visible(text)
    return el


def _body(r: Result) -> str:
    """The failure told as an operator reads it: what was expected, what was found (each failing item named), the
    action, the fix and the evidence; the reason's pointers only when no item is named."""
    lines = [r.title, f"expected: {r.expected}"]
    if r.outcome is Outcome.FAIL:
        lines += [f"found: {line}" for line in found_lines(r)] if r.findings else [f"found: {found_text(r)}"]
    if why(r) if r.outcome is Outcome.FAIL else r.reason:
        lines.append(f"reason: {r.reason}")
    if r.action:
        lines.append(f"action: {r.action}")
    if r.remediation:
        lines.append(f"remediation: {r.remediation}")
    lines.extend(f"evidence: {path}" for path in r.evidence)
    return "\n".join(lines)


def _testcase(suite: ET.Element, r: Result, counts: dict[str, int]) -> None:
    case = _sub(suite, "testcase", classname=r.check_id, name=r.host, time="0")
    counts["tests"] += 1
    if r.outcome is Outcome.FAIL:
        _sub(case, "failure", _body(r), message=found_text(r), type=r.severity.value)  # what was found
        counts["failures"] += 1
    elif r.outcome is Outcome.ERROR:
        _sub(case, "error", _body(r), message=r.reason or "collector failed", type="error")
        counts["errors"] += 1
    elif r.outcome is Outcome.SKIP:
        _sub(case, "skipped", message=r.reason)
        counts["skipped"] += 1
    elif r.outcome is Outcome.UNKNOWN:
        _sub(case, "skipped", message=f"unknown: {r.reason}" if r.reason else "unknown")
        counts["skipped"] += 1


def _suite(root: ET.Element, name: str, report: Report) -> tuple[ET.Element, dict[str, int]]:
    suite = _sub(root, "testsuite", name=name)
    when = parse_time(report.created_at)
    if when is not None:
        # The JUnit XSD's timestamp has no zone designator; the value is UTC.
        suite.set("timestamp", when.strftime("%Y-%m-%dT%H:%M:%S"))
    props = _sub(suite, "properties")
    for key, value in (
        ("run_id", report.run_id),
        ("baseline", report.baseline),
        ("tool_version", report.tool_version),
    ):
        if value:
            _sub(props, "property", name=key, value=value)
    if not len(props):
        suite.remove(props)
    return suite, dict.fromkeys(_COUNTERS, 0)


def _close(suite: ET.Element, counts: dict[str, int], totals: dict[str, int]) -> None:
    for key in _COUNTERS:
        suite.set(key, str(counts[key]))
        totals[key] += counts[key]
    suite.set("time", "0")


def _families(results: Iterable[Result]) -> dict[str, list[Result]]:
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(family_of(r), []).append(r)
    return dict(sorted(groups.items()))


def render(report: Report) -> str:
    root = ET.Element("testsuites", name="fabricproof")
    totals = dict.fromkeys(_COUNTERS, 0)
    for family, results in _families(report.results).items():
        suite, counts = _suite(root, family, report)
        for r in results:
            _testcase(suite, r, counts)
        _close(suite, counts, totals)
    if report.collection_errors:
        suite, counts = _suite(root, COLLECTION_SUITE, report)
        for host, reason in sorted(report.collection_errors.items()):
            case = _sub(suite, "testcase", classname=COLLECTION_SUITE, name=host, time="0")
            _sub(case, "error", reason, message=reason, type="collection")
            counts["tests"] += 1
            counts["errors"] += 1
        _close(suite, counts, totals)
    if report.not_proven:
        suite, counts = _suite(root, NOT_PROVEN_SUITE, report)
        for host, checks in report.not_proven.items():
            case = _sub(suite, "testcase", classname=NOT_PROVEN_SUITE, name=host, time="0")
            reason = not_proven_reason(checks)
            _sub(case, "error", reason, message=reason, type="not_proven")
            counts["tests"] += 1
            counts["errors"] += 1
        _close(suite, counts, totals)
    if report.unapplied:
        suite, counts = _suite(root, COVERAGE_SUITE, report)
        for cov in report.unapplied:
            case = _sub(suite, "testcase", classname=cov.check_id, name="no host in scope", time="0")
            _sub(case, "skipped", message=cov.reason)
            counts["tests"] += 1
            counts["skipped"] += 1
        _close(suite, counts, totals)
    # The JUnit XSD (Jenkins xunit's junit-10.xsd, which CI servers read) allows no `skipped` on <testsuites>:
    # skips are counted per suite only.
    for key in _COUNTERS[:-1]:
        root.set(key, str(totals[key]))
    root.set("time", "0")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


REPORTER = Reporter(
    name="junit",
    extension="xml",
    description="JUnit XML: a testsuite per check family, a testcase per (check, host).",
    render=render,
)
