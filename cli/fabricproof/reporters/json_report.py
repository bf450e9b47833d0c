"""The report as a JSON document (schemas/report.schema.json), and the loader that reads it back."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from collections.abc import Callable, Iterator
from json.encoder import c_make_encoder, encode_basestring
from functools import cache
from typing import Any

from ..actions import host_actions, note_action
from ..judging.packing import Spilled, result_fields
from ..model import CheckCoverage, Finding, Outcome, Report, Result, Severity
from ..paths import schemas_dir
from .base import Reporter

API_VERSION = "fabricproof/v1"
KIND = "Report"
SCHEMA_FILE = "report.schema.json"


class ReportFormatError(ValueError):
    """A JSON report that does not match schemas/report.schema.json; the message names the path."""


#: Where result_fields(r) holds the fields the host actions are gathered from.
_HOST, _OUTCOME, _ACTION = map([f.name for f in fields(Result)].index, ("host", "outcome", "action"))
#: Each outcome's and severity's text: Enum.value is a Python-level property, read twice a result (a fleet's ~112 a host).
_OUTCOMES = {o: o.value for o in Outcome}
_SEVERITIES = {s: s.value for s in Severity}


def _result(r: Result) -> dict[str, Any]:
    doc = {
        "check_id": r.check_id,
        "title": r.title,
        "host": r.host,
        "outcome": _OUTCOMES[r.outcome],
        "severity": _SEVERITIES[r.severity],
        "family": r.family,
        "expected": r.expected,
        "actual": r.actual,
        "reason": r.reason,
        "remediation": r.remediation,
        "evidence": list(r.evidence),
        "references": list(r.references),
    }
    if r.action:
        doc["action"] = r.action
    if r.findings:
        doc["findings"] = _findings(r.findings)
    return doc


def _findings(findings: tuple[Finding, ...]) -> list[dict[str, Any]]:
    return [{"pointer": f.pointer, "value": f.value, "item": f.item, "text": f.text} for f in findings]


def _before(report: Report) -> dict[str, Any]:
    """The document's keys before its results."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "run_id": report.run_id,
            "created_at": report.created_at,
            "baseline": report.baseline,
            "tool_version": report.tool_version,
        },
        "summary": asdict(report.summary),
        "hosts": list(report.hosts),
        "groups": {h: list(g) for h, g in report.groups.items()},
    }


def _after(report: Report, actions: dict[str, str]) -> dict[str, Any]:
    """The document's keys after its results; `actions`: host_actions of the results."""
    after = {
        "unapplied": [{"check_id": c.check_id, "reason": c.reason} for c in report.unapplied],
        "collection_errors": dict(report.collection_errors),
        "not_proven": {h: list(ids) for h, ids in report.not_proven.items()},
        "host_actions": actions,
    }
    if report.figures:
        after["figures"] = [dict(f) for f in report.figures]
    if report.collective is not None:
        after["collective"] = report.collective
    return after


def to_document(report: Report) -> dict[str, Any]:
    """The report as plain JSON-able data, in the shape the schema describes."""
    return {**_before(report), "results": [_result(r) for r in report.results],
            **_after(report, host_actions(report.results))}


def chunks(report: Report) -> Iterator[str]:
    """The document in pieces, indented, one result per line: readable and grep-able. A 1,000-host report
    holds 70,000 results; made one at a time (and through json's C encoder, which indent= would replace
    with the pure-Python one), they are never all in memory as dicts or as text. The results are read once (a
    fleet's come back from the spill file): the host actions after them are gathered on the way."""
    # default=str: an `actual` a check produced that JSON has no type for (a set, a Decimal) is
    # still written, as its text, rather than failing the whole report.
    line = _result_line()
    pretty = json.JSONEncoder(ensure_ascii=False, default=str, indent=2).encode

    def members(part: dict[str, Any]) -> str:
        return ",\n".join(f"  {json.dumps(k)}: {pretty(v)}".replace("\n", "\n  ") for k, v in part.items())

    yield "{\n" + members(_before(report)) + ',\n  "results": ['
    actions: dict[str, str] = {}
    results = report.results
    # A fleet's results come back from the spill as their fields: read so, no Result is made again for a line
    rows = results.fields() if isinstance(results, Spilled) else map(result_fields, results)
    for i, r in enumerate(rows):
        yield ("\n    " if i == 0 else ",\n    ") + line(r)
        note_action(actions, r[_HOST], r[_OUTCOME], r[_ACTION])
    yield ("\n  ]" if report.results else "]") + ",\n" + members(_after(report, actions)) + "\n}\n"


def _one_line_encoder() -> Callable[[Any], str]:
    """json.JSONEncoder(ensure_ascii=False, default=str).encode, its C encoder made once rather than once a call
    (a fleet's report encodes one result at a time); the same text (no circular check: results hold no cycles)."""
    encoder = json.JSONEncoder(ensure_ascii=False, default=str)
    if c_make_encoder is None:
        return encoder.encode
    iterencode = c_make_encoder(None, encoder.default, encode_basestring, encoder.indent, encoder.key_separator,
                                encoder.item_separator, encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)
    return lambda value: "".join(iterencode(value, 0))


def _result_line() -> Callable[[tuple[Any, ...]], str]:
    """_one_line_encoder()(_result(r)) of a result given as its fields (result_fields(r)), the same text, written
    from pieces: a check's results share their check's fields (id, title, family, references, action), so those are
    encoded once a check and joined with the fields of each result, and no dict is made a result (a fleet's report
    writes ~112 results a host: with Spilled.fields, 1.07-1.11 -> 0.50-0.54 ms a host in-process, side by side)."""
    encode = _one_line_encoder()

    def text(value: Any) -> str:
        return encode_basestring(value) if type(value) is str else encode(value)

    def items(values: tuple[Any, ...]) -> str:
        return "[" + ", ".join(map(text, values)) + "]"

    heads: dict[tuple[str, str], str] = {}  # (check_id, title) -> the text up to the host
    middles: dict[tuple[Outcome, Severity, str], str] = {}  # -> from the host to the expectation
    tails: dict[tuple[tuple[str, ...], str], str] = {}  # (references, action) -> after the evidence

    def line(r: tuple[Any, ...]) -> str:
        (check_id, title, host, outcome, severity, expected, actual, reason, remediation, evidence, family, references,
         findings, action) = r
        head = heads.get(key := (check_id, title))
        if head is None:
            head = heads[key] = f'{{"check_id": {text(check_id)}, "title": {text(title)}, "host": '
        middle = middles.get(between := (outcome, severity, family))
        if middle is None:
            middle = middles[between] = (f', "outcome": {text(_OUTCOMES[outcome])}, "severity": '
                                         f'{text(_SEVERITIES[severity])}, "family": {text(family)}, "expected": ')
        after = (references, action) if type(references) is tuple else None  # a list is not a key
        tail = tails.get(after) if after else None
        if tail is None:
            tail = (f', "references": {items(references)}' + (f', "action": {text(action)}' if action else ""))
            if after:
                tails[after] = tail
        found = f', "findings": {encode(_findings(findings))}' if findings else ""
        try:  # the fields a result's own strings fill, encoded as strings without a call each
            host, expected, reason, remediation = map(encode_basestring, (host, expected, reason, remediation))
            listed = "[" + ", ".join(map(encode_basestring, evidence)) + "]"
        except TypeError:  # one is not a string: json's encoding of it
            host, expected, reason, remediation = map(text, (host, expected, reason, remediation))
            listed = items(evidence)
        return (f'{head}{host}{middle}{expected}, "actual": {encode(actual)}, "reason": {reason}, "remediation": '
                f'{remediation}, "evidence": {listed}{tail}{found}}}')

    return line


def render(report: Report) -> str:
    return "".join(chunks(report))


@cache
def schema() -> dict[str, Any]:
    return json.loads((schemas_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))


def validate_document(doc: Any) -> None:
    """Raise ReportFormatError naming the first offending JSON path."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = "/" + "/".join(str(p) for p in err.absolute_path)
        raise ReportFormatError(f"{where}: {err.message}")


def report_from_json(text: str) -> Report:
    """Read a report written by render(); the summary is recomputed from the results, not trusted."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFormatError(f"not JSON: {exc}") from exc
    validate_document(doc)
    meta = doc["metadata"]
    return Report(
        results=tuple(
            Result(
                check_id=r["check_id"],
                title=r["title"],
                host=r["host"],
                outcome=Outcome(r["outcome"]),
                severity=Severity(r["severity"]),
                expected=r["expected"],
                actual=r["actual"],
                reason=r["reason"],
                remediation=r["remediation"],
                evidence=tuple(r["evidence"]),
                family=r["family"],
                references=tuple(r["references"]),
                findings=tuple(Finding(f["pointer"], f["value"], f["item"], f["text"]) for f in r.get("findings", ())),
                action=r.get("action", ""),
            )
            for r in doc["results"]
        ),
        hosts=tuple(doc["hosts"]),
        groups={h: tuple(g) for h, g in doc.get("groups", {}).items()},
        baseline=meta["baseline"],
        run_id=meta["run_id"],
        created_at=meta["created_at"],
        unapplied=tuple(CheckCoverage(check_id=c["check_id"], reason=c["reason"]) for c in doc["unapplied"]),
        collection_errors=dict(doc["collection_errors"]),
        not_proven={h: tuple(ids) for h, ids in doc.get("not_proven", {}).items()},
        tool_version=meta["tool_version"],
        figures=tuple(dict(f) for f in doc.get("figures", ())),
        collective=doc.get("collective"),
    )


REPORTER = Reporter(
    name="json",
    extension="json",
    description="The full report as JSON (schemas/report.schema.json); read back with report_from_json.",
    render=render,
    chunks=chunks,
)
