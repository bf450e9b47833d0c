"""Failing items named by what they are (GPU 1, mlx5_0 port 1) for people, while JSON and SARIF keep the pointer."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from string import Formatter

import pytest
from fabricproof import facts as facts_mod
from fabricproof.judging.baseline import load as load_baseline
from fabricproof.commands.check import nhc_lines
from fabricproof.judging.evaluate import evaluate
from fabricproof.judging.findings import ITEMS, naming_pointers
from fabricproof.model import Finding, Outcome
from fabricproof.reporters import json_report, sarif, table
from catalogkit import shipped_checks

REPO = Path(__file__).resolve().parents[2]
CHECKS = shipped_checks()
BASELINE = load_baseline(REPO / "inventories" / "lab" / "baseline.yaml")
LAB = facts_mod.load_dir(REPO / "inventories" / "lab" / "facts")
FACTS_SCHEMA = json.loads((REPO / "schemas" / "facts.schema.json").read_text())


def _schema_at(pattern: str) -> dict:
    node = FACTS_SCHEMA
    for seg in pattern.strip("/").split("/"):
        node = node["items"] if seg == "*" else node["properties"][seg]
    return node


@pytest.mark.parametrize("pattern", sorted(ITEMS))
def test_every_item_name_reads_fields_the_facts_schema_requires(pattern):
    item = _schema_at(pattern)
    fields = [name for _, name, _, _ in Formatter().parse(ITEMS[pattern]) if name]
    assert fields and item["type"] == "object"
    assert set(fields) <= set(item.get("required", ())), (pattern, fields)


def test_every_finding_template_formats_with_value_and_expected_only():
    templated = [c for c in CHECKS if c.finding]
    assert {"nvlink.links_active", "nvlink.speed", "ib.rate", "nvlink.crc_errors"} <= {c.id for c in templated}
    for c in templated:
        assert c.finding.format(value="V", expected="E"), c.id
        # a count check's counted values are their own names (the bridges with ACS on)
        assert "*" in c.fact and (c.op == "count" or naming_pointers(tuple(c.fact.strip("/").split("/")))), (
            c.id, "names no item")


def _broken() -> dict:
    facts = copy.deepcopy(LAB)
    gpu = facts["h100-0001"]["nvlink"]["status"]["gpus"][1]
    gpu["links_active"], gpu["links_inactive"] = 16, 2
    facts["h100-0001"]["ib"]["ibstat"]["ports"][0]["rate"] = 200
    return facts


def _failure(report, check_id):
    (r,) = [r for r in report.results if r.check_id == check_id and r.outcome is Outcome.FAIL]
    return r


def test_a_gpu_level_failure_is_named_by_its_gpu_and_keeps_its_pointer():
    report = evaluate(_broken(), BASELINE, CHECKS)
    links = _failure(report, "nvlink.links_active")
    assert links.findings == (Finding("/nvlink/status/gpus/1/links_active", 16, "GPU 1", "16 of 18 links active"),)
    assert links.findings[0].line == "GPU 1: 16 of 18 links active"
    assert "/nvlink/status/gpus/1/links_active = 16" in links.reason  # the pointer stays in the result
    rate = _failure(report, "ib.rate")
    assert [f.line for f in rate.findings] == ["mlx5_0 port 1: 200 Gb/s, not 400"]


def test_the_terminal_lists_findings_by_gpu_and_json_and_sarif_keep_the_pointer():
    report = evaluate(_broken(), BASELINE, CHECKS)
    text = table.render(report, width=80)
    assert "GPU 1: 16 of 18 links active" in text
    assert "/nvlink/status/gpus/1/links_active" not in text
    doc = json.loads(json_report.render(report))
    (links,) = [r for r in doc["results"] if r["check_id"] == "nvlink.links_active" and r["outcome"] == "fail"]
    assert links["findings"] == [{"pointer": "/nvlink/status/gpus/1/links_active", "value": 16, "item": "GPU 1",
                                  "text": "16 of 18 links active"}]
    assert "/nvlink/status/gpus/1/links_active = 16" in links["reason"]
    assert json_report.report_from_json(json_report.render(report)) == report  # findings and groups round-trip
    results = json.loads(sarif.render(report))["runs"][0]["results"]
    assert any("/nvlink/status/gpus/1/links_active = 16" in r["properties"]["reason"] for r in results)
    # the message is the operator's wording (issue 24.1): the item named, no pointer
    (message,) = [r["message"]["text"] for r in results if r["ruleId"] == "nvlink.links_active"]
    assert "Found: GPU 1: 16 of 18 links active." in message and "/nvlink/" not in message


def test_nhc_lines_name_the_gpu():
    report = evaluate({"h100-0001": _broken()["h100-0001"]}, BASELINE, CHECKS)
    lines = nhc_lines(report, "h100-0001", "critical")
    assert "FAIL h100-0001: nvlink.links_active (critical): GPU 1: 16 of 18 links active [action: reset_gpu]" in lines
    assert "FAIL h100-0001: ib.rate (critical): mlx5_0 port 1: 200 Gb/s, not 400 [action: reseat_cable]" in lines
    # reseat_cable (a person at the rack) is more disruptive than reset_gpu: it is the node's
    assert lines[-1] == "ACTION h100-0001: reseat_cable (the most disruptive action of its failed checks)"


def test_counter_growth_is_named_by_gpu_and_link():
    before = copy.deepcopy(LAB)
    after = copy.deepcopy(LAB)
    link = after["h100-0001"]["nvlink"]["errors"]["links"][3]
    link["crc"] += 5
    report = evaluate(after, BASELINE, CHECKS, previous=before)
    crc = _failure(report, "nvlink.crc_errors")
    assert [f.line for f in crc.findings] == [f"GPU {link['gpu']} link {link['link']}: CRC errors grew by 5 (at most 0)"]
    assert crc.findings[0].pointer == "/nvlink/errors/links/3/crc" and crc.findings[0].value == 5


def test_an_item_without_a_name_falls_back_to_its_pointer():
    facts = copy.deepcopy(LAB)
    del facts["h100-0001"]["nvlink"]["status"]["gpus"][1]["index"]  # nothing to name it by
    facts["h100-0001"]["nvlink"]["status"]["gpus"][1]["links_active"] = 16
    (f,) = _failure(evaluate(facts, BASELINE, CHECKS), "nvlink.links_active").findings
    assert (f.item, f.line) == ("", "/nvlink/status/gpus/1/links_active = 16")
