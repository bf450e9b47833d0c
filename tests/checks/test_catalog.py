"""Meta-tests over the whole catalog: schema-valid, unique ids, pointers exist, fixtures and remediation present."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from fabricproof import documents, factschema
from fabricproof.baseline import lookup
from fabricproof.catalog import load
from fabricproof.collectors import COLLECTORS
from fabricproof.paths import checks_dir, schemas_dir
from fabricproof.pointer import split_pointer

from .fixturelib import fixture_paths

CHECKS = load()
FACTS_SCHEMA = json.loads((schemas_dir() / "facts.schema.json").read_text())
BASELINE_VALUES = json.loads((schemas_dir() / "baseline.schema.json").read_text())["$defs"]["values"]


def _schema_has(schema: dict, segs: tuple[str, ...]) -> bool:
    node = schema
    for seg in segs:
        for alt in node.get("anyOf", []) + node.get("oneOf", []):  # nullable objects are written as anyOf
            if "properties" in alt or "items" in alt:
                node = alt
                break
        if seg == "*":
            if "items" in node:
                node = node["items"]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            else:
                return False
        else:
            props = node.get("properties", {})
            if seg in props:
                node = props[seg]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            else:
                return False
    return True


def _baseline_has(dotted: str) -> bool:
    node = BASELINE_VALUES
    for part in dotted.split("."):
        props = node.get("properties", {})
        if part not in props:
            return False
        node = props[part]
    return True


def test_catalog_is_large_enough_and_covers_every_family():
    assert len(CHECKS) >= 40
    families = Counter(c.family for c in CHECKS)
    assert set(families) == {"fm", "fabric", "nvlink", "nvswitch", "ib", "rdma", "pcie", "gpu", "perf"}, families


def test_every_check_file_is_schema_valid_and_ids_unique():
    files = sorted(checks_dir().rglob("*.yaml"))
    assert len(files) == len(CHECKS)
    assert len({c.id for c in CHECKS}) == len(CHECKS)
    for path in files:
        documents.validate(documents.load_yaml(path), "check")
        assert path.parent.name == load_family(path)


def load_family(path):
    return documents.load_yaml(path).data["family"]


def test_facts_schema_is_generated_from_the_collectors():
    assert FACTS_SCHEMA == factschema.build(), "run: python -m fabricproof.factschema > schemas/facts.schema.json"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_fact_pointer_exists_in_facts_schema(check):
    assert _schema_has(FACTS_SCHEMA, split_pointer(check.fact)), f"{check.fact} not in facts schema"
    provides = COLLECTORS[check.collector].provides
    assert check.fact == provides or check.fact.startswith(provides + "/")
    for cond in check.where:
        item_segs = split_pointer(check.fact)[: max(i for i, s in enumerate(split_pointer(check.fact)) if s == "*") + 1]
        assert _schema_has(FACTS_SCHEMA, item_segs + cond.path), f"where path {'/'.join(cond.path)}"
    for exp in (check.expected, *(c.expected for c in check.where)):
        if isinstance(exp, dict) and "fact" in exp:
            assert _schema_has(FACTS_SCHEMA, split_pointer(exp["fact"]))
    for cond in check.applies_when:  # they may read any collector's facts, but only facts that exist
        assert _schema_has(FACTS_SCHEMA, split_pointer(cond.fact)), f"applies_when fact {cond.fact}"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_baseline_pointers_exist_in_baseline_schema(check):
    for key in check.baseline_keys:
        assert _baseline_has(key), f"baseline key {key} is not in schemas/baseline.schema.json"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_check_is_documented_and_has_both_fixtures(check):
    assert check.remediation and len(check.remediation) > 20
    assert check.rationale and check.references
    assert not any("domain.md" in r for r in check.references), "cite public sources, not our notes"
    for kind, path in fixture_paths(check.id).items():
        assert path.is_file(), f"missing {kind} fixture {path}"


def test_lookup_helper_reads_dotted_keys():
    assert lookup({"a": {"b": 1}}, "a.b") == 1
