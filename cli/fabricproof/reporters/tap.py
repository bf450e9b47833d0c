"""TAP version 14: one test point per (check, host), YAML diagnostics for what did not pass.

pass -> "ok"; fail and error -> "not ok" (an error means the check could not be judged, which a
harness must not count as a pass), and so is a skip that leaves its host not proven; skip and unknown ->
"ok ... # SKIP reason". Collection errors, hosts not proven and checks that applied to no host are also
written as comments.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..model import Outcome, Report, Result
from ..textsafe import visible
from ._common import found_lines, found_text, not_proven_reason, status_word, summary_phrase, why
from .base import Reporter


def line(text: str) -> str:
    """Text for one TAP line: whitespace runs (line breaks too) collapsed, controls made visible."""
    return " ".join(visible(text).split())


def escape(text: str) -> str:
    """A description or directive reason: one line, with \\ and # escaped as TAP14 requires."""
    return line(text).replace("\\", "\\\\").replace("#", "\\#")


class _Dumper(yaml.SafeDumper):
    """Writes multi-line or control-character strings double-quoted, so no diagnostic line can
    start with '---' or '...' at block level and end the YAML block early."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if any(c in value for c in "\n\r\t") or not value.isprintable() else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _diagnostics(r: Result) -> dict[str, Any]:
    diag: dict[str, Any] = {
        "message": r.title,
        "severity": r.severity.value,
        "outcome": r.outcome.value,
        "check": r.check_id,
        "host": r.host,
        "expected": r.expected,
    }
    if r.outcome is Outcome.FAIL:  # the failing items named, else the value found as a sentence
        diag["found"] = found_lines(r) if r.findings else found_text(r)
    if why(r) if r.outcome is Outcome.FAIL else r.reason:  # found says it without the reason's pointers
        diag["reason"] = r.reason
    if r.action:
        diag["action"] = r.action
    if r.remediation:
        diag["remediation"] = r.remediation
    if r.evidence:
        diag["evidence"] = list(r.evidence)
    return diag


def _yaml_block(data: dict[str, Any]) -> list[str]:
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 16)
    return ["  ---", *("  " + line for line in body.splitlines()), "  ..."]


def _point(n: int, r: Result, unproven: bool = False) -> list[str]:
    desc = escape(f"{r.host} {r.check_id}")
    if r.outcome is Outcome.PASS:
        return [f"ok {n} - {desc}"]
    if r.outcome is Outcome.SKIP and not unproven:
        return [f"ok {n} - {desc} # SKIP {escape(r.reason or 'not applicable')}"]
    if r.outcome is Outcome.UNKNOWN:
        return [f"ok {n} - {desc} # SKIP {escape('unknown: ' + (r.reason or 'fact missing'))}"]
    return [f"not ok {n} - {desc}", *_yaml_block(_diagnostics(r))]


def render(report: Report) -> str:
    lines = ["TAP version 14"]
    if report.results:
        lines.append(f"1..{len(report.results)}")
    else:
        lines.append("1..0 # SKIP no results")
    meta = ", ".join(
        f"{k} {v}"
        for k, v in (("run", report.run_id), ("baseline", report.baseline), ("fabricproof", report.tool_version))
        if v
    )
    if meta:
        lines.append(f"# {line(meta)}")
    unproven = {(host, check) for host, checks in report.not_proven.items() for check in checks}
    for n, r in enumerate(report.results, start=1):
        lines.extend(_point(n, r, (r.host, r.check_id) in unproven))
    for host, reason in sorted(report.collection_errors.items()):
        lines.append(f"# collection error: {line(host)}: {line(reason)}")
    for host, checks in report.not_proven.items():
        lines.append(f"# not proven: {line(host)}: {line(not_proven_reason(checks))}")
    for cov in report.unapplied:
        lines.append(f"# applied to no host: {line(cov.check_id)}: {line(cov.reason)}")
    lines.append(f"# {status_word(report)}: {summary_phrase(report.summary)}")
    return "\n".join(lines) + "\n"


REPORTER = Reporter(
    name="tap",
    extension="tap",
    description="TAP version 14, a test point per (check, host) with YAML diagnostics.",
    render=render,
)
