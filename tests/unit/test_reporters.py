"""Reporters: each format parsed back and checked for structure, counts, names and escaping."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import defusedxml.ElementTree as SafeET
import jsonschema
import pytest
import yaml
from fabricproof.model import CheckCoverage, Outcome, Report, Result, Severity
from fabricproof.reporters import (
    REPORTERS,
    Reporter,
    html_report,
    json_report,
    junit,
    markdown,
    prometheus,
    sarif,
    table,
    tap,
)
from fabricproof.reporters._common import format_actual, host_rows, status
from fabricproof.reporters.markdown import cell
from fabricproof.textsafe import visible

SARIF_SCHEMA = Path(__file__).resolve().parent.parent / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"

# Everything a format can trip on: its own delimiters, markup of the others, a line break,
# non-ASCII, and an ANSI escape as raw tool output carries it.
AWKWARD = "pipe | quote \" apos ' <b>bold</b> & amp\nline two [red]markup[/red] # hash \\ back ünïcode 🙂 \x1b[0m"
AWKWARD_HOST = 'node "7" | <x> & #1 \\ ü'
CREATED = "2025-01-02T03:04:05Z"
CREATED_EPOCH = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()

FAIL_CRIT = Result(
    check_id="nvlink.links_active",
    title="Every GPU has all its NVLinks active",
    host="gpu-01",
    outcome=Outcome.FAIL,
    severity=Severity.CRITICAL,
    expected="Each GPU's active NVLink count is 18.",
    actual=[18, 17, 18],
    reason="GPU 1: 17 active links; " + AWKWARD,
    remediation="Drain the node and reseat the baseboard. " + AWKWARD,
    evidence=("raw/gpu-01/nvlink_status.txt", "raw/gpu-01/nvidia_smi_q.txt"),
    family="nvlink",
    references=("https://docs.nvidia.com/fm", "[FM]"),
    action="reset_gpu",
)
FAIL_WARN = Result(
    check_id="ib.rate",
    title="InfiniBand ports run at the baseline rate",
    host=AWKWARD_HOST,
    outcome=Outcome.FAIL,
    severity=Severity.WARNING,
    expected="Every IB port's rate is 400 Gb/s.",
    actual={"mlx5_0": 200, "mlx5_1": 400},
    reason="mlx5_0 at 200",
    remediation="Check the cable | transceiver.",
    family="ib",
    action="reseat_cable",
)
PASS = Result(
    check_id="nvlink.links_active",
    title="Every GPU has all its NVLinks active",
    host="gpu-02",
    outcome=Outcome.PASS,
    severity=Severity.CRITICAL,
    expected="Each GPU's active NVLink count is 18.",
    actual=18,
    family="nvlink",
    action="reset_gpu",
)
SKIP = Result(
    check_id="gpu.throttle",
    title="No GPU is clock-throttled",
    host="gpu-02",
    outcome=Outcome.SKIP,
    severity=Severity.INFO,
    expected="No GPU reports an active throttle reason.",
    reason="not applicable on a100 # per baseline",
    family="gpu",
)
UNKNOWN = Result(
    check_id="fabric.cluster_uuid_consistent",
    title="One ClusterUUID per rack",
    host="gpu-01",
    outcome=Outcome.UNKNOWN,
    severity=Severity.WARNING,
    expected="All hosts of a rack report the same ClusterUUID.",
    reason="fact /fabric/cluster_uuid missing",
    family="fabric",
)
ERROR = Result(
    check_id="fm.version_matches_driver",
    title="Fabric Manager matches the driver",
    host=AWKWARD_HOST,
    outcome=Outcome.ERROR,
    severity=Severity.CRITICAL,
    expected="The Fabric Manager version equals the driver version.",
    reason="nv-fabricmanager --version timed out after 30 s: " + AWKWARD,
    evidence=("raw/node7/fm_version.txt",),
    family="fm",
)

REPORT = Report(
    results=(FAIL_CRIT, PASS, FAIL_WARN, SKIP, UNKNOWN, ERROR),
    hosts=("gpu-01", "gpu-02", AWKWARD_HOST, "gpu-03"),
    baseline="inventories/lab/baseline.yaml",
    run_id="20250102T030405Z-abc123",
    created_at=CREATED,
    unapplied=(CheckCoverage("pcie.acs_disabled", "no host has platform b200 | " + AWKWARD),),
    collection_errors={"gpu-03": "unreachable: connection refused " + AWKWARD},
    tool_version="0.1.0",
)
EMPTY = Report(results=(), hosts=())
UNPROVEN_SKIP = Result(
    check_id="fm.version",
    title="Fabric Manager runs the pinned version",
    host="gpu-04",
    outcome=Outcome.SKIP,
    severity=Severity.CRITICAL,
    expected="the nv-fabricmanager version should be the baseline's fm.version",
    reason="not proven: baseline sets no fm.required, and this host has what the check judges (/fm/build/version)",
    family="fm",
)
#: Everything judged passed, but gpu-04's FM check had no baseline value while gpu-04 runs FM: not proven.
NOT_PROVEN = Report(results=(PASS, UNPROVEN_SKIP), hosts=("gpu-02", "gpu-04"), created_at=CREATED,
                    tool_version="0.1.0", not_proven={"gpu-04": ("fm.version",)})
ALL_PASS = Report(results=(PASS,), hosts=("gpu-02",), created_at=CREATED, tool_version="0.1.0")


# --- helpers shared by the reporters -------------------------------------------------------


def test_format_actual_keeps_strings_and_writes_the_rest_as_json():
    assert format_actual(None) == ""
    assert format_actual("17 | 18") == "17 | 18"
    assert format_actual(True) == "true"
    assert format_actual(26.562) == "26.562"
    assert format_actual({"b": 1, "a": [1, 2]}) == '{"a": [1, 2], "b": 1}'


def test_visible_escapes_control_characters_and_keeps_line_breaks():
    assert visible("a\x1b[0m\x00b\x7f\tc\nd") == "a\\x1b[0m\\x00b\\x7f\tc\nd"
    assert visible("ünï 🙂") == "ünï 🙂"


def test_status_orders_failed_over_incomplete_over_passed():
    assert status(REPORT) == "failed"
    assert status(Report(results=(PASS, ERROR), hosts=())) == "incomplete"
    assert status(Report(results=(PASS,), hosts=(), collection_errors={"h": "down"})) == "incomplete"
    assert status(Report(results=(PASS, UNKNOWN), hosts=())) == "incomplete"
    assert status(ALL_PASS) == "passed"
    assert status(EMPTY) == "empty"


@pytest.mark.parametrize("name", sorted(REPORTERS))
def test_every_reporter_names_a_host_not_proven_and_never_says_passed(name):
    text = REPORTERS[name].render(NOT_PROVEN)
    assert status(NOT_PROVEN) == "not_proven" and NOT_PROVEN.summary.hosts_not_proven == 1
    assert "gpu-04" in text and "fm.version" in text
    assert re.search(r"not[ _]proven", text, re.IGNORECASE), text
    assert "PASSED" not in text
    if name == "junit":
        case = SafeET.fromstring(text).find(".//testsuite[@name='not_proven']/testcase[@name='gpu-04']")
        assert case is not None and case.find("error") is not None
    if name == "tap":
        assert "not ok 2 - gpu-04 fm.version" in text
    if name == "sarif":
        assert json.loads(text)["runs"][0]["invocations"][0]["executionSuccessful"] is False
    if name == "prometheus":
        assert 'fabricproof_host_not_proven{host="gpu-04"} 1' in text


def test_host_rows_cover_hosts_without_results_and_name_the_worst_failure():
    rows = {r.host: r for r in host_rows(REPORT)}
    assert list(rows) == ["gpu-01", "gpu-02", AWKWARD_HOST, "gpu-03"]
    assert (rows["gpu-01"].failed, rows["gpu-01"].total, rows["gpu-01"].worst) == (1, 2, Severity.CRITICAL)
    assert rows[AWKWARD_HOST].worst is Severity.WARNING and rows[AWKWARD_HOST].not_verified == 1
    assert rows["gpu-02"].state == "passed"
    assert rows["gpu-03"].state == "incomplete" and rows["gpu-03"].collection_error.startswith("unreachable")


# --- registry ------------------------------------------------------------------------------


def test_registry_names_every_format_with_its_file_suffix():
    assert {name: r.extension for name, r in REPORTERS.items()} == {
        "table": "txt",
        "json": "json",
        "junit": "xml",
        "sarif": "sarif",
        "tap": "tap",
        "prometheus": "prom",
        "markdown": "md",
        "html": "html",
    }
    for name, reporter in REPORTERS.items():
        assert isinstance(reporter, Reporter) and reporter.name == name and reporter.description
    with pytest.raises(AttributeError):
        REPORTERS["json"].name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(REPORTERS))
@pytest.mark.parametrize("report", [REPORT, EMPTY, ALL_PASS, NOT_PROVEN], ids=["mixed", "empty", "all-pass", "not-proven"])
def test_every_reporter_renders_a_newline_terminated_string(name, report):
    text = REPORTERS[name].render(report)
    assert isinstance(text, str) and text.endswith("\n")
    if name != "json" and name != "sarif":  # JSON keeps data exactly; its escaping is JSON's own
        assert "\x1b" not in text


def test_importing_the_registry_does_not_import_rich():
    code = "import sys, fabricproof.reporters; sys.exit('rich' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- json ----------------------------------------------------------------------------------


def _walk_schema(node, path="#"):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    yield from _walk_schema(sub, f"{path}/{key}/{name}")
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                yield from _walk_schema(value, f"{path}/{key}")


def test_report_schema_is_2020_12_and_describes_every_field():
    schema = json_report.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["apiVersion"]["const"] == "fabricproof/v1"
    assert schema["properties"]["kind"]["const"] == "Report"
    nodes = list(_walk_schema(schema))
    assert len(nodes) > 40
    for path, node in nodes:
        assert node.get("description"), f"{path} has no description"
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, f"{path} allows unknown keys"


@pytest.mark.parametrize("report", [REPORT, EMPTY, ALL_PASS, NOT_PROVEN], ids=["mixed", "empty", "all-pass", "not-proven"])
def test_json_validates_against_the_report_schema_and_round_trips(report):
    text = json_report.render(report)
    doc = json.loads(text)
    jsonschema.Draft202012Validator(json_report.schema()).validate(doc)
    assert report_equal(json_report.report_from_json(text), report)


def report_equal(a: Report, b: Report) -> bool:
    return a == b and a.summary == b.summary


def test_json_carries_summary_metadata_and_every_result_field():
    doc = json.loads(json_report.render(REPORT))
    assert doc["apiVersion"] == "fabricproof/v1" and doc["kind"] == "Report"
    assert doc["metadata"] == {
        "run_id": REPORT.run_id,
        "created_at": CREATED,
        "baseline": REPORT.baseline,
        "tool_version": "0.1.0",
    }
    assert doc["summary"] == {
        "total": 6,
        "passed": 1,
        "failed": 2,
        "skipped": 1,
        "unknown": 1,
        "errors": 1,
        "failed_by_severity": {"critical": 1, "warning": 1},
        "hosts": 4,
        "hosts_failed": 2,
        "hosts_not_proven": 0,
    }
    first = doc["results"][0]
    assert first["actual"] == [18, 17, 18]
    assert first["reason"].endswith(AWKWARD)  # JSON keeps the raw text, control characters included
    assert first["evidence"] == list(FAIL_CRIT.evidence)
    assert doc["results"][2]["host"] == AWKWARD_HOST
    assert doc["unapplied"] == [{"check_id": "pcie.acs_disabled", "reason": REPORT.unapplied[0].reason}]
    assert doc["collection_errors"] == REPORT.collection_errors


def test_json_writes_values_json_has_no_type_for_as_text():
    odd = Report(results=(Result("gpu.x", "t", "h", Outcome.FAIL, Severity.INFO, "e", actual=frozenset({3})),), hosts=("h",))
    doc = json.loads(json_report.render(odd))
    assert doc["results"][0]["actual"] == "frozenset({3})"


def test_json_writes_each_result_line_as_json_encodes_its_document():
    """chunks() writes a result's line from its check's pieces, encoded once a check (issue 23.1): each line is the
    text json gives the result's document, byte for byte, whatever the fields hold (JSON's own delimiters, non-ASCII,
    control characters, values JSON has no type for, NaN, findings, no action, a second check and outcome)."""
    from fabricproof.model import Finding

    odd = [
        FAIL_CRIT,
        dataclasses.replace(FAIL_CRIT, host=AWKWARD_HOST, actual={"a": [1.5, None, True]}, findings=(
            Finding("/nvlink/status/gpus/1", 17, "GPU 1", AWKWARD), Finding("/x", float("nan")))),
        dataclasses.replace(FAIL_CRIT, outcome=Outcome.PASS, remediation="", reason="", actual=frozenset({3}),
                            evidence=(), action=""),
        dataclasses.replace(FAIL_CRIT, check_id="ib.rate", title=AWKWARD, family="ib", references=(),
                            severity=Severity.WARNING, expected=AWKWARD, actual=float("inf")),
        dataclasses.replace(FAIL_CRIT, references=["listed", "not a tuple"], evidence=["raw/x"], actual="\u003a"),
        dataclasses.replace(FAIL_CRIT, title="the same check, another title", family="other"),
        dataclasses.replace(FAIL_CRIT, host=7, reason=None, evidence=("raw/y", 3)),  # not strings: json's text
    ]
    report = Report(results=tuple(odd), hosts=("gpu-01",))
    lines = [line.lstrip(" ,\n") for line in json_report.chunks(report)][1:-1]
    plain = json.JSONEncoder(ensure_ascii=False, default=str)
    assert lines == [plain.encode(json_report._result(r)) for r in odd]


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d.update(kind="Baseline"), "/kind"),
        (lambda d: d["results"][0].update(outcome="flaky"), "/results/0/outcome"),
        (lambda d: d["results"][1].update(colour="red"), "/results/1"),
        (lambda d: d["metadata"].pop("run_id"), "/metadata"),
        (lambda d: d["collection_errors"].update({"gpu-09": 3}), "/collection_errors/gpu-09"),
    ],
)
def test_report_from_json_rejects_documents_off_schema_naming_the_path(mutate, where):
    doc = json.loads(json_report.render(REPORT))
    mutate(doc)
    with pytest.raises(json_report.ReportFormatError) as exc:
        json_report.report_from_json(json.dumps(doc))
    assert str(exc.value).startswith(where + ":")


def test_report_from_json_rejects_text_that_is_not_json():
    with pytest.raises(json_report.ReportFormatError, match="not JSON"):
        json_report.report_from_json("{'apiVersion': ")


def test_report_from_json_recomputes_the_summary_instead_of_trusting_it():
    doc = json.loads(json_report.render(REPORT))
    doc["summary"]["failed"] = 0
    assert json_report.report_from_json(json.dumps(doc)).summary.failed == 2


# --- junit ---------------------------------------------------------------------------------


def _junit(report: Report):
    return SafeET.fromstring(junit.render(report).encode("utf-8"))


def test_junit_has_a_suite_per_family_and_a_case_per_check_and_host():
    root = _junit(REPORT)
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["fabric", "fm", "gpu", "ib", "nvlink", "collection", "coverage"]
    cases = [(c.get("classname"), c.get("name")) for c in suites["nvlink"].findall("testcase")]
    assert cases == [("nvlink.links_active", "gpu-01"), ("nvlink.links_active", "gpu-02")]
    # the awkward host name comes back exactly, newline-free but with quotes, <, &, # and \
    assert suites["ib"].find("testcase").get("name") == AWKWARD_HOST


def test_junit_counts_add_up_per_suite_and_overall():
    root = _junit(REPORT)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        counted = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
        }
        assert {k: int(suite.get(k)) for k in counted} == counted, suite.get("name")
        for k, v in counted.items():
            totals[k] += v
    # the root carries what the JUnit XSD lets it carry (no skipped); each suite carries all four
    assert {k: int(root.get(k)) for k in ("tests", "failures", "errors")} == {k: totals[k] for k in ("tests", "failures", "errors")}
    assert root.get("skipped") is None
    # 6 results + 1 unreachable host + 1 unapplied check
    assert totals == {"tests": 8, "failures": 2, "errors": 2, "skipped": 3}


def test_junit_failure_carries_expected_severity_and_the_full_story():
    root = _junit(REPORT)
    case = next(c for c in root.iter("testcase") if (c.get("classname"), c.get("name")) == ("nvlink.links_active", "gpu-01"))
    failure = case.find("failure")
    assert failure.get("message") == "[18, 17, 18]"  # what was found (issue 24.1), the expectation is in the body
    assert failure.get("type") == "critical"
    body = failure.text
    assert f"expected: {FAIL_CRIT.expected}" in body and "found: [18, 17, 18]" in body
    assert "remediation: Drain the node" in body
    assert "evidence: raw/gpu-01/nvidia_smi_q.txt" in body
    # markup and quotes survive, the ANSI escape is shown rather than embedded
    assert 'quote " apos \' <b>bold</b> & amp\nline two [red]markup[/red]' in body
    assert "\\x1b[0m" in body and "\x1b" not in body


def test_junit_maps_error_skip_unknown_and_collection_errors():
    root = _junit(REPORT)
    by_class = {c.get("classname"): c for c in root.iter("testcase")}
    error = by_class["fm.version_matches_driver"].find("error")
    assert error.get("message").startswith("nv-fabricmanager --version timed out")
    assert "\n" in error.get("message")  # attribute newlines are escaped as &#10;, not lost
    assert by_class["gpu.throttle"].find("skipped").get("message") == SKIP.reason
    assert by_class["fabric.cluster_uuid_consistent"].find("skipped").get("message") == "unknown: " + UNKNOWN.reason
    unreachable = by_class["collection"]
    assert unreachable.get("name") == "gpu-03"
    assert unreachable.find("error").get("type") == "collection"
    assert by_class["pcie.acs_disabled"].find("skipped") is not None
    assert list(by_class["nvlink.links_active"]) == []  # a pass has no child element


def test_junit_suites_carry_run_properties_and_a_utc_timestamp():
    suite = _junit(REPORT).find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props == {"run_id": REPORT.run_id, "baseline": REPORT.baseline, "tool_version": "0.1.0"}
    assert suite.get("timestamp") == "2025-01-02T03:04:05"


JUNIT_XSD = Path(__file__).resolve().parent.parent / "fixtures" / "junit" / "junit-10.xsd"


@pytest.fixture(scope="module")
def junit_schema():
    """Jenkins xUnit's published junit-10.xsd, as pytest ships it (tests/fixtures/junit/SOURCE.md)."""
    import hashlib

    import xmlschema

    digest = hashlib.sha256(JUNIT_XSD.read_bytes()).hexdigest()
    assert digest == "a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6", "the fixture was edited"
    return xmlschema.XMLSchema(str(JUNIT_XSD))


@pytest.mark.parametrize("report", [REPORT, EMPTY, ALL_PASS, NOT_PROVEN], ids=["mixed", "empty", "all-pass", "not-proven"])
def test_junit_validates_against_the_published_junit_schema(junit_schema, report):
    errors = [f"{e.path}: {e.reason}" for e in junit_schema.iter_errors(junit.render(report))]
    assert errors == []


def test_junit_schema_fixture_rejects_what_it_forbids(junit_schema):
    assert not junit_schema.is_valid(junit.render(REPORT).replace("<testsuites ", '<testsuites skipped="3" ', 1))


def test_junit_empty_report_is_an_empty_suite_list():
    root = _junit(EMPTY)
    assert root.findall("testsuite") == []
    assert {k: root.get(k) for k in ("tests", "failures", "errors")} == dict.fromkeys(("tests", "failures", "errors"), "0")


# --- sarif ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    # The OASIS 2.1.0 errata01 schema is written in draft-04.
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    assert schema["id"].endswith("/errata01/os/schemas/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


@pytest.mark.parametrize("report", [REPORT, EMPTY, ALL_PASS, NOT_PROVEN], ids=["mixed", "empty", "all-pass", "not-proven"])
def test_sarif_validates_against_the_official_schema(sarif_validator, report):
    doc = json.loads(sarif.render(report))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in sarif_validator.iter_errors(doc)]
    assert errors == []
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1


def test_sarif_schema_fixture_rejects_what_the_spec_forbids(sarif_validator):
    doc = json.loads(sarif.render(REPORT))
    doc["runs"][0]["results"][0]["level"] = "critical"
    assert not sarif_validator.is_valid(doc)


def test_sarif_rules_are_the_checks_that_appear_with_mapped_levels():
    run = json.loads(sarif.render(REPORT))["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "fabricproof" and driver["version"] == "0.1.0"
    rules = {r["id"]: r for r in driver["rules"]}
    assert list(rules) == [
        "nvlink.links_active",
        "ib.rate",
        "gpu.throttle",
        "fabric.cluster_uuid_consistent",
        "fm.version_matches_driver",
    ]
    assert rules["nvlink.links_active"]["defaultConfiguration"]["level"] == "error"
    assert rules["ib.rate"]["defaultConfiguration"]["level"] == "warning"
    assert rules["gpu.throttle"]["defaultConfiguration"]["level"] == "note"
    assert rules["nvlink.links_active"]["shortDescription"]["text"] == FAIL_CRIT.title
    assert rules["nvlink.links_active"]["help"]["text"] == FAIL_CRIT.remediation
    assert rules["nvlink.links_active"]["properties"]["severity"] == "critical"
    assert rules["nvlink.links_active"]["properties"]["references"] == list(FAIL_CRIT.references)


def test_sarif_results_are_failures_only_located_on_their_host():
    run = json.loads(sarif.render(REPORT))["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert [(r["ruleId"], r["properties"]["host"]) for r in results] == [
        ("nvlink.links_active", "gpu-01"),
        ("ib.rate", AWKWARD_HOST),
    ]
    for res in results:
        assert res["kind"] == "fail"
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        (loc,) = res["locations"]
        (logical,) = loc["logicalLocations"]
        assert logical["kind"] == "device" and logical["name"] == res["properties"]["host"]
    crit, warn = results
    assert crit["level"] == "error" and warn["level"] == "warning"
    assert crit["message"]["text"].startswith("gpu-01: Each GPU's active NVLink count is 18. Found: [18, 17, 18].")
    assert crit["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "checks/nvlink/nvlink.links_active.yaml"
    assert [a["artifactLocation"]["uri"] for a in crit["attachments"]] == list(FAIL_CRIT.evidence)
    assert warn["properties"]["actual"] == {"mlx5_0": 200, "mlx5_1": 400}


def test_sarif_fingerprints_tell_hosts_apart_and_are_stable():
    same_check_two_hosts = Report(
        results=(FAIL_CRIT, dataclasses.replace(FAIL_CRIT, host="gpu-05")),
        hosts=("gpu-01", "gpu-05"),
    )
    first = json.loads(sarif.render(same_check_two_hosts))["runs"][0]["results"]
    again = json.loads(sarif.render(same_check_two_hosts))["runs"][0]["results"]
    prints = [r["partialFingerprints"][sarif.FINGERPRINT_KEY] for r in first]
    assert len(set(prints)) == 2
    assert prints == [r["partialFingerprints"][sarif.FINGERPRINT_KEY] for r in again]


def test_sarif_unjudged_checks_and_lost_hosts_are_notifications():
    run = json.loads(sarif.render(REPORT))["runs"][0]
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    assert invocation["startTimeUtc"] == CREATED
    notes = invocation["toolExecutionNotifications"]
    rules = run["tool"]["driver"]["rules"]
    by_rule = {n["associatedRule"]["id"]: n for n in notes if "associatedRule" in n}
    assert by_rule["fm.version_matches_driver"]["level"] == "error"
    assert by_rule["fabric.cluster_uuid_consistent"]["level"] == "warning"
    for rule_id, note in by_rule.items():
        assert rules[note["associatedRule"]["index"]]["id"] == rule_id
    lost = [n for n in notes if "associatedRule" not in n]
    assert [n["locations"][0]["logicalLocations"][0]["name"] for n in lost] == ["gpu-03"]
    assert lost[0]["message"]["text"].startswith("collection failed on gpu-03: unreachable")
    (config,) = invocation["toolConfigurationNotifications"]
    assert config["associatedRule"] == {"id": "pcie.acs_disabled"}
    assert run["automationDetails"]["id"] == f"fabricproof/{REPORT.run_id}"


def test_sarif_empty_report_has_no_rules_no_results_and_succeeded():
    run = json.loads(sarif.render(EMPTY))["runs"][0]
    assert run["results"] == [] and run["tool"]["driver"]["rules"] == []
    assert run["invocations"][0]["executionSuccessful"] is True
    assert "version" not in run["tool"]["driver"] and "automationDetails" not in run


# --- tap -----------------------------------------------------------------------------------

_POINT = re.compile(r"^(not ok|ok) (\d+)(?: - (.*))?$")


def _split_directive(rest: str) -> tuple[str, str | None, str | None]:
    """Split a test point's text at the first unescaped '#', and undo TAP14 escapes."""
    out, i = [], 0
    while i < len(rest):
        ch = rest[i]
        if ch == "\\" and i + 1 < len(rest) and rest[i + 1] in "\\#":
            out.append(rest[i + 1])
            i += 2
            continue
        if ch == "#":
            directive = rest[i + 1 :].strip()
            kind, _, reason = directive.partition(" ")
            return "".join(out).rstrip(), kind.upper(), _unescape(reason)
        out.append(ch)
        i += 1
    return "".join(out), None, None


def _unescape(text: str) -> str:
    return re.sub(r"\\([\\#])", r"\1", text)


def _parse_tap(text: str):
    lines = text.splitlines()
    assert lines[0] == "TAP version 14"
    plan = lines[1]
    points, i = [], 2
    while i < len(lines):
        line = lines[i]
        m = _POINT.match(line)
        if m:
            desc, directive, reason = _split_directive(m.group(3) or "")
            point = {"ok": m.group(1) == "ok", "n": int(m.group(2)), "desc": desc, "directive": directive, "reason": reason}
            if i + 1 < len(lines) and lines[i + 1] == "  ---":
                end = lines.index("  ...", i + 2)
                block = "\n".join(ln[2:] for ln in lines[i + 2 : end])
                assert all(ln.startswith("  ") for ln in lines[i + 2 : end])
                point["yaml"] = yaml.safe_load(block)
                i = end
            points.append(point)
        else:
            assert line.startswith("#"), f"unexpected TAP line {line!r}"
        i += 1
    return plan, points, [ln for ln in lines if ln.startswith("#")]


def test_tap_plan_numbers_and_outcomes():
    plan, points, _ = _parse_tap(tap.render(REPORT))
    assert plan == "1..6"
    assert [p["n"] for p in points] == [1, 2, 3, 4, 5, 6]
    assert [(p["ok"], p["directive"]) for p in points] == [
        (False, None),  # fail
        (True, None),  # pass
        (False, None),  # fail
        (True, "SKIP"),  # skip
        (True, "SKIP"),  # unknown
        (False, None),  # error: not judged is not a pass
    ]
    assert points[0]["desc"] == "gpu-01 nvlink.links_active"
    assert points[3]["reason"] == SKIP.reason  # its '#' was escaped, not taken as a directive
    assert points[4]["reason"] == "unknown: " + UNKNOWN.reason


def test_tap_escapes_hash_and_backslash_in_descriptions():
    _, points, _ = _parse_tap(tap.render(REPORT))
    assert points[2]["desc"] == f"{AWKWARD_HOST} ib.rate"
    assert points[2]["directive"] is None


def test_tap_yaml_diagnostics_round_trip_expected_actual_severity():
    _, points, _ = _parse_tap(tap.render(REPORT))
    crit = points[0]["yaml"]
    assert crit["severity"] == "critical" and crit["outcome"] == "fail"
    assert crit["expected"] == FAIL_CRIT.expected
    assert crit["found"] == "[18, 17, 18]"  # the operator's wording (issue 24.1): JSON keeps the raw value
    assert crit["remediation"] == FAIL_CRIT.remediation  # newline, quotes and ESC intact in YAML
    assert crit["evidence"] == list(FAIL_CRIT.evidence)
    error = points[5]["yaml"]
    assert error["outcome"] == "error" and error["host"] == AWKWARD_HOST
    assert error["reason"] == ERROR.reason
    assert "yaml" not in points[1] and "yaml" not in points[3]


def test_tap_comments_list_lost_hosts_unapplied_checks_and_totals():
    _, _, comments = _parse_tap(tap.render(REPORT))
    assert any(c.startswith("# collection error: gpu-03: unreachable: connection refused") for c in comments)
    assert any(c.startswith("# applied to no host: pcie.acs_disabled: ") for c in comments)
    assert comments[-1].startswith("# FAILED: 2 failed (1 critical, 1 warning), 1 passed")


def test_tap_empty_report_plans_zero_tests():
    plan, points, _ = _parse_tap(tap.render(EMPTY))
    assert plan == "1..0 # SKIP no results" and points == []


# --- prometheus ----------------------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
_PAIR = rf"([a-zA-Z_][a-zA-Z0-9_]*)=({_LABEL_VALUE})"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{((?:{_PAIR})(?:,{_PAIR})*,?)?\}})? (\S+)$")
_HELP = re.compile(rf"^# HELP ({_NAME}) ((?:[^\\\n]|\\[\\n])*)$")
_TYPE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")


def _label_unescape(quoted: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], quoted[1:-1])


def _parse_exposition(text: str):
    """Line-level validation per the text exposition format, as node_exporter's textfile
    collector reads it; returns {name: {"type", "help", "samples": {labels: value}}}."""
    assert text.endswith("\n")
    families: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        assert line, "blank lines are not expected"
        if m := _HELP.match(line):
            assert m.group(1) not in families, f"HELP for {m.group(1)} twice"
            families[m.group(1)] = {"help": m.group(2), "type": None, "samples": {}}
            current = m.group(1)
        elif m := _TYPE.match(line):
            assert m.group(1) == current and families[current]["type"] is None and not families[current]["samples"]
            families[current]["type"] = m.group(2)
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a valid sample line: {line!r}"
            name = m.group(1)
            assert name == current, f"{name} sample outside its family (samples must be contiguous)"
            pairs = re.findall(_PAIR, m.group(2) or "")
            names = [k for k, _ in pairs]
            assert len(names) == len(set(names)), f"duplicate label in {line!r}"
            labels = frozenset((k, _label_unescape(v)) for k, v in pairs)
            value = float(m.group(len(m.groups())))  # no timestamp: the textfile collector rejects them
            assert labels not in families[name]["samples"], f"duplicate series {line!r}"
            families[name]["samples"][labels] = value
    for name, fam in families.items():
        assert fam["type"] == "gauge", name
        assert name.startswith("fabricproof_")
    return families


def _series(families, name, **labels):
    want = set(labels.items())
    return {k: v for k, v in families[name]["samples"].items() if want <= set(k)}


def test_prometheus_output_parses_as_text_exposition():
    families = _parse_exposition(prometheus.render(REPORT))
    assert set(families) == {
        "fabricproof_check_result",
        "fabricproof_check_outcome",
        "fabricproof_checks",
        "fabricproof_hosts",
        "fabricproof_hosts_failed",
        "fabricproof_host_action",
        "fabricproof_collection_error",
        "fabricproof_check_unapplied",
        "fabricproof_run_info",
        "fabricproof_last_run_timestamp_seconds",
    }
    assert not any(name.endswith("_total") for name in families)  # no gauge wears a counter suffix


def test_prometheus_check_result_is_one_for_pass_zero_for_fail_and_absent_otherwise():
    families = _parse_exposition(prometheus.render(REPORT))
    results = families["fabricproof_check_result"]["samples"]
    assert len(results) == 3
    key = frozenset({("check", "nvlink.links_active"), ("host", "gpu-01"), ("family", "nvlink"), ("severity", "critical"),
                     ("action", "reset_gpu")})
    assert results[key] == 0
    assert _series(families, "fabricproof_check_result", host="gpu-02") == {
        frozenset({("check", "nvlink.links_active"), ("host", "gpu-02"), ("family", "nvlink"), ("severity", "critical"),
                   ("action", "reset_gpu")}): 1
    }
    # the awkward host name survives label escaping exactly
    assert list(_series(families, "fabricproof_check_result", host=AWKWARD_HOST).values()) == [0]
    assert not _series(families, "fabricproof_check_result", check="fm.version_matches_driver")


def test_prometheus_outcome_series_cover_every_result_once():
    families = _parse_exposition(prometheus.render(REPORT))
    outcomes = families["fabricproof_check_outcome"]["samples"]
    assert len(outcomes) == len(REPORT.results) and set(outcomes.values()) == {1}
    got = sorted((dict(k)["check"], dict(k)["host"], dict(k)["outcome"]) for k in outcomes)
    assert got == sorted((r.check_id, r.host, r.outcome.value) for r in REPORT.results)


def test_prometheus_counts_hosts_run_info_and_timestamp():
    families = _parse_exposition(prometheus.render(REPORT))
    counts = {dict(k)["outcome"]: v for k, v in families["fabricproof_checks"]["samples"].items()}
    assert counts == {"pass": 1, "fail": 2, "skip": 1, "unknown": 1, "error": 1}
    assert families["fabricproof_hosts"]["samples"] == {frozenset(): 4}
    assert families["fabricproof_hosts_failed"]["samples"] == {frozenset(): 2}
    assert families["fabricproof_host_action"]["samples"] == {
        frozenset({("host", "gpu-01"), ("action", "reset_gpu")}): 1,
        frozenset({("host", AWKWARD_HOST), ("action", "reseat_cable")}): 1,
    }
    assert families["fabricproof_collection_error"]["samples"] == {frozenset({("host", "gpu-03")}): 1}
    assert families["fabricproof_check_unapplied"]["samples"] == {frozenset({("check", "pcie.acs_disabled")}): 1}
    (info,) = families["fabricproof_run_info"]["samples"]
    assert dict(info) == {"run_id": REPORT.run_id, "baseline": REPORT.baseline, "version": "0.1.0"}
    assert families["fabricproof_last_run_timestamp_seconds"]["samples"] == {frozenset(): CREATED_EPOCH}


def test_prometheus_escapes_label_values_per_the_exposition_format():
    assert prometheus.escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    text = prometheus.render(REPORT)
    assert 'host="node \\"7\\" | <x> & #1 \\\\ ü"' in text


def test_prometheus_empty_report_has_zero_counts_and_no_timestamp():
    families = _parse_exposition(prometheus.render(EMPTY))
    assert set(families["fabricproof_checks"]["samples"].values()) == {0}
    assert "fabricproof_check_result" not in families
    assert "fabricproof_last_run_timestamp_seconds" not in families  # never invented
    assert families["fabricproof_hosts"]["samples"] == {frozenset(): 0}


# --- markdown ------------------------------------------------------------------------------


def _md_cells(row: str) -> list[str]:
    """Split a GFM table row on unescaped pipes."""
    assert row.startswith("| ") and row.endswith(" |")
    return [c.strip() for c in re.split(r"(?<!\\)\|", row[1:-1])]


def _md_tables(text: str) -> dict[str, list[list[str]]]:
    """Tables by the heading or <summary> above them."""
    tables: dict[str, list[list[str]]] = {}
    heading = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("### ") or line.startswith("<details><summary>"):
            heading = re.sub(r"<[^>]+>", "", line.removeprefix("### "))
        if line.startswith("|---"):
            header = _md_cells(lines[i - 1])
            rows = []
            for body in lines[i + 1 :]:
                if not body.startswith("|"):
                    break
                cells = _md_cells(body)
                assert len(cells) == len(header), body
                rows.append(cells)
            tables[heading] = [header, *rows]
    return tables


def test_markdown_summary_line_has_a_status_word_and_counts_without_emoji():
    text = markdown.render(REPORT)
    lines = text.splitlines()
    assert lines[0] == "## fabricproof: FAILED"
    assert lines[2].startswith(
        "**FAILED**: 2 failed (1 critical, 1 warning), 1 passed, 1 skipped, 1 unknown, 1 error; 4 hosts, 2 with failures"
    )
    header = "\n".join(lines[:5])
    assert not re.search("[\U0001F300-\U0001FAFF\u2600-\u27BF]", header)
    assert markdown.render(ALL_PASS).startswith("## fabricproof: PASSED")
    assert markdown.render(EMPTY).startswith("## fabricproof: NO RESULTS")


def test_markdown_failures_table_escapes_pipes_markup_and_html():
    tables = _md_tables(markdown.render(REPORT))
    header, crit, warn = tables["Failures (2)"]
    assert header == ["Check", "Host", "Severity", "Found", "Action"]
    assert crit[:3] == ["nvlink.links\\_active", "gpu-01", "critical"]  # worst first
    assert crit[4] == "reset\\_gpu"
    assert warn[1] == "node \"7\" \\| &lt;x&gt; &amp; #1 \\\\ ü"
    # what each check expects and its fix, once per check (issue 24.1: not repeated on every host's row)
    header, crit, warn = tables["What the failing checks expect (2)"]
    assert header == ["Check", "Expected", "Remediation"]
    remediation = crit[2]
    assert "\\|" in remediation and "\n" not in remediation and "<br>" not in remediation  # YAML breaks undone
    reason = tables["Not verified (2)"][1][0]
    assert "<br>" in reason and "\n" not in reason  # a line break of the text itself is kept as <br>
    assert "&lt;b&gt;bold&lt;/b&gt;" in remediation and "<b>" not in remediation
    assert "&amp; amp" in remediation and "\\[red\\]markup\\[/red\\]" in remediation
    assert "\\\\x1b\\[0m" in remediation  # ESC shown as text, its backslash escaped
    assert warn[2] == "Check the cable \\| transceiver."


def test_markdown_lists_unjudged_by_cause_lost_hosts_unapplied_and_counts_passes():
    text = markdown.render(REPORT)
    tables = _md_tables(text)
    assert [row[:3] for row in tables["Not verified (2)"][1:]] == [
        [cell(ERROR.reason), "error", "1: node \"7\" \\| &lt;x&gt; &amp; #1 \\\\ ü"],
        ["fact /fabric/cluster\\_uuid missing", "unknown", "1: gpu-01"],
    ]
    assert tables["Collection errors (1)"][1][0] == "gpu-03"
    assert tables["Checks that applied to no host (1)"][1][0] == "pcie.acs\\_disabled"
    # passes are counted per check (issue 24.1), folded, after the failures; no pass is listed per host
    checks = text.index("<details><summary>Checks (5: passed and skipped as counts)</summary>")
    assert text.index("</details>", checks) > text.index("| nvlink.links\\_active | critical | 1 | 1 | 0 | 0 |  |", checks)
    assert text.index("### Failures") < checks
    assert "gpu-02" not in text  # it passed: counted, not named


def test_markdown_empty_report_has_no_tables():
    text = markdown.render(EMPTY)
    assert "|" not in text and "<details>" not in text


# --- html ----------------------------------------------------------------------------------


class _Page(HTMLParser):
    """Collects tags, section order, and the text of every table cell by table class."""

    VOID = {"meta", "br", "hr", "img", "link", "input"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.sections: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == "section":
            self.sections.append(attrs["id"])
        if tag == "table":
            self._table = attrs["class"]
            self.tables.setdefault(self._table, [])  # tables of one class (one per failing check) add up
        if tag == "tr":
            self._row = []
        if tag in ("td", "th"):
            self._cell = []
        if tag == "li" and self._cell is not None and self._cell:
            self._cell.append("\n")

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()
        if tag in ("td", "th"):
            self._row.append("".join(self._cell))
            self._cell = None
        if tag == "tr":
            self.tables[self._table].append(self._row)
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _page(report: Report) -> _Page:
    page = _Page()
    page.feed(html_report.render(report))
    page.close()
    assert page.stack == []
    return page


def test_html_is_self_contained_its_policy_forbids_every_load_and_allows_its_own_script():
    import base64
    import hashlib

    text = html_report.render(REPORT)
    assert text.startswith("<!DOCTYPE html>")
    page = _page(REPORT)
    tags = [t for t, _ in page.tags]
    assert "link" not in tags and "img" not in tags and "iframe" not in tags and tags.count("style") == 1
    assert tags.count("script") == 1 and not any(t == "script" and a for t, a in page.tags)  # inline, no src
    assert not any(k == "src" or k.startswith("on") for _, attrs in page.tags for k in attrs)
    assert all(v.startswith("#") for _, attrs in page.tags for k, v in attrs.items() if k == "href")  # in-page only
    (policy,) = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    script = text[text.index("<script>") + 8 : text.index("</script>")]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert "default-src 'none'" in policy and f"script-src 'sha256-{digest}'" in policy
    assert ("meta", {"charset": "utf-8"}) in page.tags


def test_html_escapes_every_value_and_keeps_it_readable():
    text = html_report.render(REPORT)
    assert "<b>bold</b>" not in text and "&lt;b&gt;bold&lt;/b&gt;" in text
    page = _page(REPORT)
    fails = page.tables["fails"]
    assert fails[0] == ["host", "group", "found", "evidence"]
    rows = {row[0]: row for row in fails[1:] if row != fails[0]}
    assert rows["gpu-01"][2] == "[18, 17, 18]" and rows["gpu-01"][3] == "".join(FAIL_CRIT.evidence)
    assert AWKWARD_HOST in rows  # exact text back
    body = "".join(page.text)
    assert visible(FAIL_CRIT.remediation) in body  # once per check, ESC made visible


def test_html_reads_verdict_heatmap_failures_then_what_was_not_judged():
    page = _page(REPORT)
    assert page.sections == ["heatmap", "failures", "not-verified", "unapplied", "checks"]
    tiles = [a["data-host"] for t, a in page.tags if t == "div" and "data-host" in a]
    assert tiles == sorted(["gpu-01", "gpu-02", AWKWARD_HOST, "gpu-03"])  # one group, by name
    failure_rows = [(a["data-check"], a["data-host"]) for t, a in page.tags if t == "tr" and a.get("class") == "failure"]
    assert failure_rows == [("nvlink.links_active", "gpu-01"), ("ib.rate", AWKWARD_HOST)]  # worst first
    assert page.tables["unapplied"][1] == ["pcie.acs_disabled", visible(REPORT.unapplied[0].reason)]
    assert page.tables["collection-errors"][1][0] == "gpu-03"
    # a passing result is counted per check, never listed per host: the page does not grow with every pass
    assert not any(a.get("data-host") == "gpu-02" for t, a in page.tags if t == "tr")


def test_html_groups_hosts_by_their_most_specific_inventory_group():
    rack = dataclasses.replace(REPORT, groups={"gpu-01": ("gb200_nvl72", "lab", "rack_01"),
                                               "gpu-02": ("gb200_nvl72", "lab", "rack_02"),
                                               AWKWARD_HOST: ("gb200_nvl72", "lab", "rack_01")})
    assert html_report.row_group(rack) == {"gpu-01": "rack_01", "gpu-02": "rack_02", AWKWARD_HOST: "rack_01",
                                           "gpu-03": "ungrouped"}


def test_html_empty_report_says_so():
    page = _page(EMPTY)
    body = "".join(page.text)
    assert "NO RESULTS" in body and "No check failed." in body and "No hosts." in body


# --- table ---------------------------------------------------------------------------------


def test_table_renders_plain_text_with_every_section():
    text = table.render(REPORT, width=400)
    assert "\x1b" not in text  # no colour codes when rendering to a string
    assert text.splitlines()[0].startswith("FAILED  2 failed (1 critical, 1 warning)")
    for needle in ("Hosts", "Failures (2)", "Not verified (2)", "Collection errors (1)", "Unapplied checks (1)"):
        assert needle in text
    assert "1/2" in text and "critical" in text  # gpu-01: failed/total and worst severity
    assert FAIL_CRIT.expected in text and "Drain the node and reseat the baseboard." in text
    assert "[red]markup[/red]" in text  # data is never read as rich markup
    assert "\\x1b[0m" in text
    assert AWKWARD_HOST in text


def test_table_failures_are_ordered_worst_first():
    text = table.render(REPORT, width=400)
    failures = text[text.index("Failures (2)") :]
    assert failures.index("nvlink.links_active") < failures.index("ib.rate")


def test_table_print_to_uses_the_consoles_colours():
    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=200)
    table.print_to(console, REPORT)
    out = console.file.getvalue()
    assert "\x1b[" in out and "FAILED" in out


def test_table_empty_report():
    text = table.render(EMPTY)
    assert text.startswith("NO RESULTS  0 failed") and "Failures" not in text


def test_table_respects_width():
    text = table.render(REPORT, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80


def test_table_failures_stay_readable_at_80_columns():
    """CI logs are 80 columns: each failure is a block whose sentence and fix read as prose, not folded cells."""
    text = table.render(REPORT, width=80)
    fails = text[text.index("Failures (2)") :]
    lines = fails.splitlines()
    assert any(line.strip().startswith("expected") and FAIL_CRIT.expected[:40] in line for line in lines)
    assert any(line.strip().startswith("fix") for line in lines)
    assert any("nvlink.links_active" in line and "critical" in line for line in lines)


def test_table_never_breaks_a_word_at_80_columns():
    """Every header, name, state and word of the text comes out whole at 80 columns ("failed/tota l" was a bug)."""
    long_reason = "unreachable: connection refused by 10.0.0.7 after 3 attempts within the host timeout window " * 2
    report = dataclasses.replace(
        REPORT,
        hosts=(*REPORT.hosts, "gpu-rack12-node-0042"),
        collection_errors={**REPORT.collection_errors, "gpu-rack12-node-0042": long_reason},
    )
    text = table.render(report, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    lines = text.splitlines()
    words = {"failed/total", "unjudged", "incomplete", "critical", "gpu-rack12-node-0042",
             "fabric.cluster_uuid_consistent", "fm.version_matches_driver", "pcie.acs_disabled"}
    words |= set(long_reason.split())
    words |= set(FAIL_CRIT.remediation.split()[:6]) | set(UNKNOWN.reason.split())
    broken = sorted(w for w in words if not any(w in line for line in lines))
    assert broken == []


def test_table_joins_a_remediation_broken_over_yaml_lines_into_prose():
    r = dataclasses.replace(FAIL_CRIT, remediation="Reseat the cable,\nthen confirm the switch\nport speed.\n\nThen re-run.")
    text = table.render(Report(results=(r,), hosts=("gpu-01",)), width=200)
    assert "Reseat the cable, then confirm the switch port speed." in text


# --- the action a failure calls for, in every format ------------------------------------------

#: gpu-01 fails a reset_gpu check and a reboot one (reboot is the more disruptive), and passes a drain_and_inspect
#: one: a host's action comes from its failures only.
TWO_FAILS = Report(
    results=(FAIL_CRIT,
             dataclasses.replace(FAIL_CRIT, check_id="gpu.fallen_off_bus", title="No GPU fell off the bus",
                                 action="reboot", family="gpu"),
             dataclasses.replace(PASS, host="gpu-01", check_id="nvlink.crc_errors", action="drain_and_inspect"),
             FAIL_WARN),
    hosts=("gpu-01", AWKWARD_HOST),
)


def test_json_report_carries_each_results_action_and_each_hosts_most_severe():
    doc = json.loads(json_report.render(TWO_FAILS))
    json_report.validate_document(doc)
    assert [r["action"] for r in doc["results"]] == ["reset_gpu", "reboot", "drain_and_inspect", "reseat_cable"]
    assert doc["host_actions"] == {"gpu-01": "reboot", AWKWARD_HOST: "reseat_cable"}
    assert json_report.report_from_json(json_report.render(TWO_FAILS)) == TWO_FAILS
    assert json.loads(json_report.render(ALL_PASS))["host_actions"] == {}


def test_json_report_written_before_actions_reads_back_without_them():
    doc = json.loads(json_report.render(TWO_FAILS))
    del doc["host_actions"]
    for r in doc["results"]:
        del r["action"]
    back = json_report.report_from_json(json.dumps(doc))
    assert {r.action for r in back.results} == {""}


def test_sarif_junit_tap_markdown_and_table_show_the_action():
    sarif_doc = json.loads(sarif.render(TWO_FAILS))
    assert [r["properties"]["action"] for r in sarif_doc["runs"][0]["results"]] == ["reset_gpu", "reboot",
                                                                                      "reseat_cable"]
    assert "action: reboot\n" in junit.render(TWO_FAILS)
    assert "action: reseat_cable" in tap.render(TWO_FAILS)
    hosts = _md_tables(markdown.render(TWO_FAILS))["Hosts that did not pass (2 of 2)"]
    assert hosts[0][-1] == "Action" and [row[-1] for row in hosts[1:]] == ["reboot", "reseat\\_cable"]
    assert [line.split()[1] for line in table.render(TWO_FAILS).splitlines() if line.split()[:1] == ["action"]] == [
        "reboot", "reset_gpu", "reseat_cable"]


def test_prometheus_host_action_is_the_most_disruptive_of_its_failures():
    families = _parse_exposition(prometheus.render(TWO_FAILS))
    assert families["fabricproof_host_action"]["samples"] == {
        frozenset({("host", "gpu-01"), ("action", "reboot")}): 1,
        frozenset({("host", AWKWARD_HOST), ("action", "reseat_cable")}): 1,
    }
    assert "fabricproof_host_action" not in _parse_exposition(prometheus.render(ALL_PASS))
