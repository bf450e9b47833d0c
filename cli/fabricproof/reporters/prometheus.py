"""Prometheus text exposition for node_exporter's textfile collector (write to a *.prom file).

Metrics (all gauges, no sample timestamps: the textfile collector rejects them):
  fabricproof_check_result{check,host,family,severity,action}   1 pass, 0 fail. Only judged
      results have it, so `== 0` means a real failure and never "could not tell"; action is what
      the check's failure calls for (actions.ACTIONS).
  fabricproof_check_outcome{check,host,family,severity,action,outcome} 1 for every result, one series
      per (check, host) whose outcome label is pass|fail|skip|unknown|error: the series to
      alert on for results that could not be judged (outcome="error"|"unknown").
  fabricproof_checks{outcome}            results of the run per outcome (all five, zeros too)
  fabricproof_hosts / fabricproof_hosts_failed     hosts in scope / with a failed result
  fabricproof_host_action{host,action}   1 per host with a failed result: the most disruptive action of its failures
  fabricproof_collection_error{host}     1 per host whose facts could not be collected
  fabricproof_check_unapplied{check}     1 per check that applied to no host
  fabricproof_run_info{run_id,baseline,version}    1
  fabricproof_last_run_timestamp_seconds  when the report was made (absent if not recorded)

`fabricproof_checks` is a per-run gauge, so it does not carry the `_total` suffix Prometheus
reserves for counters.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..actions import host_actions
from ..model import Outcome, Report, Result
from ._common import family_of, host_rows, parse_time
from .base import Reporter

PREFIX = "fabricproof"


def escape_label(value: str) -> str:
    """Label value escaping of the text exposition format: backslash, double quote, newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text escaping: backslash and newline (quotes stay as they are)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Exposition:
    """Collects metric families in order; every family's samples stay contiguous."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, help_text: str, samples: list[tuple[list[tuple[str, str]], float]]) -> None:
        if not samples:
            return
        full = f"{PREFIX}_{name}"
        self.lines.append(f"# HELP {full} {escape_help(help_text)}")
        self.lines.append(f"# TYPE {full} gauge")
        self.lines.extend(f"{full}{_labels(labels)} {_number(value)}" for labels, value in samples)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(report: Report) -> str:
    out = _Exposition()

    def ident(r: Result) -> list[tuple[str, str]]:
        return [("check", r.check_id), ("host", r.host), ("family", family_of(r)), ("severity", r.severity.value),
                ("action", r.action)]

    out.family(
        "check_result",
        "1 if the check held on the host, 0 if it failed; absent when it could not be judged.",
        [(ident(r), int(r.outcome is Outcome.PASS)) for r in report.results if r.outcome in (Outcome.PASS, Outcome.FAIL)],
    )
    out.family(
        "check_outcome",
        "1 for the outcome (pass, fail, skip, unknown, error) of each check on each host.",
        [([*ident(r), ("outcome", r.outcome.value)], 1) for r in report.results],
    )
    summary = report.summary
    counts = {
        Outcome.PASS: summary.passed,
        Outcome.FAIL: summary.failed,
        Outcome.SKIP: summary.skipped,
        Outcome.UNKNOWN: summary.unknown,
        Outcome.ERROR: summary.errors,
    }
    out.family(
        "checks",
        "Number of (check, host) results of the last run, by outcome.",
        [([("outcome", o.value)], n) for o, n in counts.items()],
    )
    out.family("hosts", "Hosts in scope of the last run.", [([], summary.hosts)])
    out.family("hosts_failed", "Hosts with at least one failed check in the last run.", [([], summary.hosts_failed)])
    out.family(
        "host_action",
        "1 for each host with a failed check: the most disruptive action its failures call for.",
        [([("host", host), ("action", action)], 1) for host, action in host_actions(report.results).items()],
    )
    out.family(
        "collection_error",
        "1 for each host whose facts could not be collected in the last run.",
        [([("host", row.host)], 1) for row in host_rows(report) if row.collection_error],
    )
    out.family(
        "host_not_proven",
        "1 for each host whose hardware's checks had no baseline value in the last run (not proven).",
        [([("host", host)], 1) for host in report.not_proven],
    )
    out.family(
        "check_unapplied",
        "1 for each check that applied to no host in the last run.",
        [([("check", cov.check_id)], 1) for cov in report.unapplied],
    )
    out.family(
        "run_info",
        "Identity of the last run; always 1.",
        [([("run_id", report.run_id), ("baseline", report.baseline), ("version", report.tool_version)], 1)],
    )
    when = parse_time(report.created_at)
    if when is not None:
        out.family("last_run_timestamp_seconds", "Unix time the last run's report was made.", [([], when.timestamp())])
    return out.text()


REPORTER = Reporter(
    name="prometheus",
    extension="prom",
    description="Prometheus text format for node_exporter's textfile collector.",
    render=render,
)
