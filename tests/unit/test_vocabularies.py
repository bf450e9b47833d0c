"""Every name a Python registry declares is accepted where the schemas take it, and a new name flows through."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml
from fabricproof import documents, schemagen
from fabricproof.judging.catalog import FAMILIES
from fabricproof.judging.catalog import load as load_catalog
from fabricproof.collectors import COLLECTORS
from fabricproof.model import Outcome, Scope, Severity
from fabricproof.judging.ops import OPERATORS, Kind, Operator
from fabricproof.paths import checks_dir, inventories_dir, schemas_dir
from fabricproof.platforms import _GPU_NAMES, DEVICE_IDS, NO_NVLINK_DEVICE_IDS, PLATFORMS, platform_of, platform_of_name
from fabricproof.reporters import REPORTERS
from fabricproof.rollout.plan import POLICIES
from fabricproof.transport import TRANSPORTS

CHECK = yaml.safe_load((checks_dir() / "nvlink" / "nvlink.links_active.yaml").read_text())
BASELINE = yaml.safe_load((inventories_dir() / "lab" / "baseline.yaml").read_text())
PLAN = yaml.safe_load((inventories_dir() / "lab" / "plans" / "driver-fm-upgrade.yml").read_text())
RUNBOOK = yaml.safe_load((inventories_dir() / "lab" / "runbooks" / "restart-fabric-manager.yml").read_text())


def _errors(schema: str | dict, doc) -> list[str]:
    validator = documents.validator(schema) if isinstance(schema, str) else jsonschema.Draft202012Validator(schema)
    return [f"{documents.pointer(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def _with(doc, change):
    doc = copy.deepcopy(doc)
    change(doc)
    return doc


def _check_using(op: str, where_op: str = "eq") -> dict:
    def change(d):
        d["assert"] = {"op": op, "expected": 1}
        if op == "count":
            d["assert"]["compare"] = "ge"
        if OPERATORS[op].fleet:
            d["scope"] = "fleet"
            del d["assert"]["expected"]
        d["assert"]["where"] = [{"path": "state", "op": where_op, "expected": "Active"}]

    return _with(CHECK, change)


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_every_operator_is_accepted_by_the_check_schema(op):
    assert _errors("check", _check_using(op)) == []


@pytest.mark.parametrize("op", sorted(n for n, o in OPERATORS.items() if o.kind is not Kind.AGGREGATE))
def test_every_per_value_operator_is_accepted_in_where(op):
    assert _errors("check", _check_using("eq", where_op=op)) == []


@pytest.mark.parametrize("op", sorted(n for n, o in OPERATORS.items() if o.kind is Kind.AGGREGATE))
def test_aggregate_operators_are_refused_in_where(op):
    assert [e for e in _errors("check", _check_using("eq", where_op=op)) if e.startswith("/assert/where/0/op:")]


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_count_compares_with_exactly_the_comparison_operators(op):
    doc = _with(_check_using("count"), lambda d: d["assert"].update(compare=op))
    assert (_errors("check", doc) == []) is (OPERATORS[op].kind is Kind.COMPARISON)


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_expected_is_required_by_exactly_the_operators_taking_it(op):
    doc = _with(_check_using(op), lambda d: d["assert"].pop("expected", None))
    assert ("/assert: 'expected' is a required property" in _errors("check", doc)) is OPERATORS[op].takes_expected


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_platform_is_accepted_by_the_baseline_and_check_schemas(platform):
    assert _errors("check", _with(CHECK, lambda d: d.update(platforms=[platform]))) == []
    assert _errors("baseline", _with(BASELINE, lambda d: d["spec"]["defaults"].update(platform=platform))) == []


def test_the_gpu_name_map_yields_only_known_platforms_and_every_collector_names_known_ones():
    assert set(_GPU_NAMES.values()) | (set(DEVICE_IDS.values()) - {None}) <= set(PLATFORMS)
    assert platform_of_name("NVIDIA GB200") == "gb200" and platform_of_name("NVIDIA B200") == "b200"
    assert platform_of_name("Tesla T4") is None
    # exact names only: GH200 is no H200, and an H100 NVL card is no HGX H100
    assert platform_of_name("NVIDIA GH200 480GB") is None and platform_of_name("NVIDIA H100 NVL") is None
    assert all(len(k) == 4 and k == k.lower() for k in DEVICE_IDS)
    # the printed device id decides over the name
    assert platform_of({"pci_device_id": "2342", "name": "NVIDIA H200"}) is None
    assert platform_of({"pci_device_id": None, "name": "NVIDIA H200"}) == "h200"


def test_the_checks_that_skip_gpus_without_nvlink_list_exactly_the_platform_table_ids():
    conds = {c.id: a for c in load_catalog() for a in c.applies_when if a.fact == "/gpu/gpus/*/pci_device_id"}
    assert {"nvlink.links_active", "nvlink.speed"} <= conds.keys()
    for cond in conds.values():
        assert cond.op == "not_in" and tuple(cond.expected) == NO_NVLINK_DEVICE_IDS
    assert not set(NO_NVLINK_DEVICE_IDS) & set(DEVICE_IDS)
    for collector in COLLECTORS.values():
        assert set(collector.platforms) <= set(PLATFORMS), collector.id


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_accepted_by_the_check_schema_and_is_a_catalog_folder(family):
    assert _errors("check", _with(CHECK, lambda d: d.update(family=family))) == []
    assert (checks_dir() / family).is_dir()


@pytest.mark.parametrize("scope", list(Scope))
def test_every_scope_is_accepted_by_the_check_schema(scope):
    doc = _check_using("same") if scope is Scope.FLEET else CHECK
    assert _errors("check", _with(doc, lambda d: d.update(scope=scope.value))) == []


@pytest.mark.parametrize("severity", [s.value for s in Severity])
def test_every_severity_is_accepted_wherever_the_schemas_take_one(severity):
    assert _errors("check", _with(CHECK, lambda d: d.update(severity=severity))) == []
    assert _errors("rollout", _with(PLAN, lambda d: d["spec"]["gates"].update(fail_on=severity))) == []
    step = next(i for i, s in enumerate(RUNBOOK["spec"]["steps"]) if "validate" in s)
    assert _errors("runbook", _with(RUNBOOK, lambda d: d["spec"]["steps"][step]["validate"].update(fail_on=severity))) == []
    report = json.loads((schemas_dir() / "report.schema.json").read_text())
    assert _errors(report["$defs"]["result"] | {"$defs": report["$defs"]}, _result(severity=severity)) == []
    summary = report["properties"]["summary"]["properties"]["failed_by_severity"] | {"$defs": report["$defs"]}
    assert _errors(summary, {severity: 1}) == []


@pytest.mark.parametrize("outcome", [o.value for o in Outcome])
def test_every_outcome_is_accepted_by_the_report_schema(outcome):
    report = json.loads((schemas_dir() / "report.schema.json").read_text())
    assert _errors(report["$defs"]["result"] | {"$defs": report["$defs"]}, _result(outcome=outcome)) == []


def _result(**values) -> dict:
    return {"check_id": "a.b", "title": "t", "host": "h", "outcome": "pass", "severity": "info", "family": "gpu",
            "expected": "x", "actual": None, "reason": "", "remediation": "", "evidence": [], "references": []} | values


@pytest.mark.parametrize("name", sorted(REPORTERS))
def test_every_reporter_is_accepted_by_the_rollout_schema_reports(name):
    assert _errors("rollout", _with(PLAN, lambda d: d["spec"].update(reports=[name]))) == []


@pytest.mark.parametrize("policy", POLICIES)
def test_every_failure_policy_is_accepted_by_the_rollout_schema(policy):
    assert _errors("rollout", _with(PLAN, lambda d: d["spec"].update(on_failure=policy))) == []


@pytest.mark.parametrize("via", TRANSPORTS)
def test_every_transport_is_accepted_as_the_facts_via(via):
    via_schema = json.loads((schemas_dir() / "facts.schema.json").read_text())["properties"]["via"]
    assert _errors(via_schema, via) == []


# --- a name added in Python reaches the schema through the generator, and only through it ---------------


def _generated(name: str) -> dict:
    return json.loads(schemagen.generate()[name])


def test_a_new_reporter_is_refused_by_the_committed_schema_until_it_is_regenerated(monkeypatch):
    plan = _with(PLAN, lambda d: d["spec"].update(reports=["csv"]))
    assert _errors("rollout", plan)
    monkeypatch.setitem(REPORTERS, "csv", REPORTERS["json"])
    assert _errors(_generated("rollout.schema.json"), plan) == []


def test_a_new_operator_reaches_the_lists_of_its_kind(monkeypatch):
    monkeypatch.setitem(OPERATORS, "glob", Operator("glob", Kind.MATCH, "match the glob", "matches the glob"))
    schema = _generated("check.schema.json")
    assert _errors(schema, _check_using("glob", where_op="glob")) == []
    assert _errors(schema, _with(_check_using("count"), lambda d: d["assert"].update(compare="glob")))
    assert _errors("check", _check_using("glob"))


def test_a_new_platform_reaches_both_schemas(monkeypatch):
    from fabricproof import platforms

    monkeypatch.setattr(platforms, "PLATFORMS", (*PLATFORMS, "gb300"))
    assert _errors(_generated("check.schema.json"), _with(CHECK, lambda d: d.update(platforms=["gb300"]))) == []
    baseline = _with(BASELINE, lambda d: d["spec"]["defaults"].update(platform="gb300"))
    assert _errors(_generated("baseline.schema.json"), baseline) == []
    assert _errors("baseline", baseline)
