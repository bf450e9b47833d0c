"""SARIF 2.1.0: failed checks as results of one run, for code scanning dashboards.

Design, against the OASIS 2.1.0 spec and what GitHub code scanning ingests:
- rules are the checks that appear in the report; defaultConfiguration.level maps severity
  (critical -> error, warning -> warning, info -> note); help is the remediation.
- results are failures only (kind "fail"). A pass is not a finding, and error/unknown mean the
  check could not be judged, which SARIF models as a tool execution condition, not a result:
  those, and hosts whose collection failed, become invocations[0].toolExecutionNotifications;
  checks that applied to no host become toolConfigurationNotifications.
- the target of a check is a host, not a file: each location names the host as a logical
  location (kind "device"; none of the spec's well-known kinds describes a machine). GitHub
  rejects results without a physical location, so the location also points at the check's
  catalog file (checks/<family>/<check_id>.yaml): stable across runs, unlike evidence paths,
  which carry the run id and go into attachments instead.
- partialFingerprints carry a hash of (check, host), so one check failing on many hosts stays
  many alerts rather than being merged by file and line.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import quote

from ..model import Outcome, Report, Result, Severity
from ._common import family_of, found_text, not_proven_reason, parse_time, sentence, why
from .base import Reporter

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
TOOL_NAME = "fabricproof"
FINGERPRINT_KEY = "checkHost/v1"
HOST_KIND = "device"

LEVELS = {Severity.CRITICAL: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def catalog_uri(r: Result) -> str:
    """Repository-relative URI of the check's catalog file."""
    return quote(f"checks/{family_of(r)}/{r.check_id}.yaml")


def fingerprint(check_id: str, host: str) -> str:
    return hashlib.sha256(f"{check_id}\0{host}".encode()).hexdigest()


def _host_location(host: str, r: Result | None = None) -> dict[str, Any]:
    loc: dict[str, Any] = {}
    if r is not None:
        loc["physicalLocation"] = {"artifactLocation": {"uri": catalog_uri(r)}}
    loc["logicalLocations"] = [{"name": host, "fullyQualifiedName": host, "kind": HOST_KIND}]
    return loc


def _rule(results: list[Result]) -> dict[str, Any]:
    """The rule for one check, from its results (the first that carries each text wins)."""
    first = results[0]
    title = next((r.title for r in results if r.title), first.check_id)
    remediation = next((r.remediation for r in results if r.remediation), "")
    references = next((r.references for r in results if r.references), ())
    rule: dict[str, Any] = {
        "id": first.check_id,
        "name": first.check_id,
        "shortDescription": {"text": title},
        "defaultConfiguration": {"level": LEVELS[first.severity]},
        "properties": {"severity": first.severity.value, "family": family_of(first), "tags": [family_of(first)]},
    }
    if remediation:
        rule["help"] = {"text": remediation}
    if references:
        rule["properties"]["references"] = list(references)
    return rule


def _message(r: Result) -> str:
    """Expected and found as sentences, each failing item named; the reason's pointers only when none is."""
    found = found_text(r) or "nothing observed"
    text = f"{r.host}: {sentence(r.expected)} Found: {sentence(found)}"
    if why(r):
        text += f" {sentence(r.reason)}"
    return text


def _result(r: Result, rule_index: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ruleId": r.check_id,
        "ruleIndex": rule_index,
        "kind": "fail",
        "level": LEVELS[r.severity],
        "message": {"text": _message(r)},
        "locations": [_host_location(r.host, r)],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint(r.check_id, r.host)},
        "properties": {
            "host": r.host,
            "severity": r.severity.value,
            "expected": r.expected,
            "actual": r.actual,
            "reason": r.reason,
            "remediation": r.remediation,
            "action": r.action,
        },
    }
    if r.evidence:
        out["attachments"] = [
            {"artifactLocation": {"uri": quote(path)}, "description": {"text": "raw command output"}}
            for path in r.evidence
        ]
    return out


def _unjudged(r: Result, rule_index: int) -> dict[str, Any]:
    """An error or unknown result as a notification: the check could not be evaluated."""
    what = "collector failed" if r.outcome is Outcome.ERROR else "fact missing"
    return {
        "level": "error" if r.outcome is Outcome.ERROR else "warning",
        "message": {"text": f"{r.check_id} on {r.host}: {what}" + (f": {r.reason}" if r.reason else "")},
        "locations": [_host_location(r.host)],
        "associatedRule": {"id": r.check_id, "index": rule_index},
        "properties": {"outcome": r.outcome.value, "host": r.host},
    }


def to_document(report: Report) -> dict[str, Any]:
    by_check: dict[str, list[Result]] = {}
    for r in report.results:
        by_check.setdefault(r.check_id, []).append(r)
    rules = [_rule(results) for results in by_check.values()]
    rule_index = {check_id: i for i, check_id in enumerate(by_check)}

    results = [_result(r, rule_index[r.check_id]) for r in report.results if r.outcome is Outcome.FAIL]
    execution = [
        _unjudged(r, rule_index[r.check_id])
        for r in report.results
        if r.outcome in (Outcome.ERROR, Outcome.UNKNOWN)
    ]
    execution += [
        {
            "level": "error",
            "message": {"text": f"collection failed on {host}: {reason}"},
            "locations": [_host_location(host)],
        }
        for host, reason in sorted(report.collection_errors.items())
    ]
    execution += [
        {
            "level": "error",
            "message": {"text": f"{host} is not proven: {not_proven_reason(checks)}"},
            "locations": [_host_location(host)],
        }
        for host, checks in report.not_proven.items()
    ]
    configuration = [
        {
            "level": "warning",
            "message": {"text": f"{cov.check_id} applied to no host: {cov.reason}"},
            "associatedRule": {"id": cov.check_id},
        }
        for cov in report.unapplied
    ]

    driver: dict[str, Any] = {"name": TOOL_NAME, "rules": rules}
    if report.tool_version:
        driver["version"] = report.tool_version
    invocation: dict[str, Any] = {
        # Unreachable hosts and failed collectors mean the run did not finish its job.
        "executionSuccessful": not (report.collection_errors or report.not_proven
                                    or any(r.outcome is Outcome.ERROR for r in report.results)),
        "toolExecutionNotifications": execution,
        "toolConfigurationNotifications": configuration,
    }
    started = parse_time(report.created_at)
    if started is not None:
        invocation["startTimeUtc"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "invocations": [invocation],
        "results": results,
        "properties": {"hosts": list(report.hosts), "baseline": report.baseline},
    }
    if report.run_id:
        # GitHub takes what precedes the last "/" as the analysis category.
        run["automationDetails"] = {"id": f"{TOOL_NAME}/{report.run_id.replace('/', '_')}"}
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def render(report: Report) -> str:
    return json.dumps(to_document(report), indent=2, ensure_ascii=False, default=str) + "\n"


REPORTER = Reporter(
    name="sarif",
    extension="sarif",
    description="SARIF 2.1.0 for code scanning: failures as results, unjudged checks as notifications.",
    render=render,
)
