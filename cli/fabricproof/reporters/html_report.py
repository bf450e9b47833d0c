"""One self-contained HTML page: inline CSS, no script, every value escaped; failures first."""

from __future__ import annotations

from html import escape

from ..model import Outcome, Report, Result
from ..textsafe import visible
from ._common import (
    by_severity,
    failures,
    format_actual,
    host_rows,
    not_verified,
    status,
    status_word,
    summary_phrase,
)
from .base import Reporter

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1b1f24;background:#fff}
h1{font-size:1.5rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:2rem 0 .5rem}
table{border-collapse:collapse;width:100%;margin:.25rem 0}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
td{white-space:pre-wrap;word-break:break-word}
th{background:#f6f8fa}
.status{display:inline-block;font-weight:700;padding:.15rem .6rem;border-radius:4px;color:#fff}
.status-failed{background:#cf222e}.status-incomplete{background:#bf8700}
.status-passed{background:#1a7f37}.status-empty{background:#6e7781}
.meta{color:#57606a;margin:.25rem 0 1rem}
tr.outcome-fail td.outcome{color:#cf222e;font-weight:700}
tr.outcome-error td.outcome,tr.outcome-unknown td.outcome{color:#bf8700;font-weight:700}
tr.outcome-pass td.outcome{color:#1a7f37}tr.outcome-skip td.outcome{color:#6e7781}
td.severity-critical{font-weight:700}
ul.evidence{margin:0;padding-left:1rem}
details summary{cursor:pointer}
""".strip()


_READING_ORDER = {Outcome.FAIL: 0, Outcome.ERROR: 1, Outcome.UNKNOWN: 2, Outcome.PASS: 3, Outcome.SKIP: 4}


def _e(text: str) -> str:
    return escape(visible(text), quote=True)


def _table(section: str, header: list[str], rows: list[str]) -> list[str]:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    return [f'<table class="{section}">', f"<thead><tr>{head}</tr></thead>", "<tbody>", *rows, "</tbody>", "</table>"]


def _td(text: str, cls: str = "") -> str:
    attr = f' class="{_e(cls)}"' if cls else ""
    return f"<td{attr}>{_e(text)}</td>"


def _evidence(r: Result) -> str:
    if not r.evidence:
        return "<td></td>"
    items = "".join(f"<li>{_e(p)}</li>" for p in r.evidence)
    return f'<td><ul class="evidence">{items}</ul></td>'


def _failure_row(r: Result) -> str:
    return (
        f'<tr class="outcome-{r.outcome.value}">'
        + _td(r.check_id)
        + _td(r.host)
        + _td(r.severity.value, f"severity-{r.severity.value}")
        + _td(r.expected)
        + _td(format_actual(r.actual))
        + _td(r.reason)
        + _td(r.remediation)
        + _evidence(r)
        + "</tr>"
    )


def _result_row(r: Result) -> str:
    return (
        f'<tr class="outcome-{r.outcome.value}">'
        + _td(r.outcome.value, "outcome")
        + _td(r.check_id)
        + _td(r.title)
        + _td(r.host)
        + _td(r.severity.value, f"severity-{r.severity.value}")
        + _td(r.expected)
        + _td(format_actual(r.actual))
        + _td(r.reason)
        + _evidence(r)
        + "</tr>"
    )


def render(report: Report) -> str:
    word = status_word(report)
    meta = " · ".join(
        f"{label} {value}"
        for label, value in (
            ("run", report.run_id),
            ("baseline", report.baseline),
            ("at", report.created_at),
            ("fabricproof", report.tool_version),
        )
        if value
    )
    body = [
        '<header id="summary">',
        "<h1>fabricproof report</h1>",
        f'<p><span class="status status-{status(report)}">{_e(word)}</span> {_e(summary_phrase(report.summary))}</p>',
    ]
    if meta:
        body.append(f'<p class="meta">{_e(meta)}</p>')
    body.append("</header>")

    fails = failures(report)
    body += ['<section id="failures">', f"<h2>Failures ({len(fails)})</h2>"]
    if fails:
        body += _table(
            "failures",
            ["Check", "Host", "Severity", "Expected", "Actual", "Reason", "Remediation", "Evidence"],
            [_failure_row(r) for r in fails],
        )
    else:
        body.append("<p>No check failed.</p>")
    body.append("</section>")

    unjudged = not_verified(report)
    if unjudged:
        body += ['<section id="not-verified">', f"<h2>Not verified ({len(unjudged)})</h2>"]
        body += _table(
            "not-verified",
            ["Outcome", "Check", "Host", "Reason", "Evidence"],
            [
                f'<tr class="outcome-{r.outcome.value}">'
                + _td(r.outcome.value, "outcome")
                + _td(r.check_id)
                + _td(r.host)
                + _td(r.reason)
                + _evidence(r)
                + "</tr>"
                for r in unjudged
            ],
        )
        body.append("</section>")
    if report.collection_errors:
        body += ['<section id="collection-errors">', f"<h2>Collection errors ({len(report.collection_errors)})</h2>"]
        body += _table(
            "collection-errors",
            ["Host", "Reason"],
            [f"<tr>{_td(h)}{_td(reason)}</tr>" for h, reason in sorted(report.collection_errors.items())],
        )
        body.append("</section>")
    if report.unapplied:
        body += ['<section id="unapplied">', f"<h2>Checks that applied to no host ({len(report.unapplied)})</h2>"]
        body += _table(
            "unapplied", ["Check", "Reason"], [f"<tr>{_td(c.check_id)}{_td(c.reason)}</tr>" for c in report.unapplied]
        )
        body.append("</section>")

    rows = host_rows(report)
    if rows:
        body += ['<section id="hosts">', f"<h2>Hosts ({len(rows)})</h2>"]
        body += _table(
            "hosts",
            ["Host", "State", "Failed", "Passed", "Not verified", "Skipped", "Worst severity", "Collection error"],
            [
                "<tr>"
                + _td(h.host)
                + _td(h.state)
                + _td(str(h.failed))
                + _td(str(h.passed))
                + _td(str(h.not_verified))
                + _td(str(h.skipped))
                + _td(h.worst.value if h.worst else "")
                + _td(h.collection_error)
                + "</tr>"
                for h in rows
            ],
        )
        body.append("</section>")

    # Failures first, then what could not be judged, then the rest: the order an operator
    # reads a report in; within an outcome, worst severity first.
    ordered = sorted(by_severity(report.results), key=lambda r: _READING_ORDER[r.outcome])
    body += ['<section id="results">', f"<h2>All results ({len(ordered)})</h2>"]
    if ordered:
        body += _table(
            "results",
            ["Outcome", "Check", "Title", "Host", "Severity", "Expected", "Actual", "Reason", "Evidence"],
            [_result_row(r) for r in ordered],
        )
    else:
        body.append("<p>No results.</p>")
    body.append("</section>")

    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>fabricproof report: {_e(word)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
    ]
    return "\n".join(page) + "\n"


REPORTER = Reporter(
    name="html",
    extension="html",
    description="One self-contained HTML page: summary, failures first, then every result.",
    render=render,
)
