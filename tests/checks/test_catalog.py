"""Meta-tests over the whole catalog: schema-valid, unique ids, pointers exist, fixtures and remediation present."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from fabricproof import documents, factschema
from fabricproof.actions import ACTIONS, most_severe, rank
from fabricproof.judging.baseline import lookup
from fabricproof.judging.catalog import load
from fabricproof.collectors import COLLECTORS
from fabricproof.errors import InputError
from fabricproof.paths import checks_dir, schemas_dir
from fabricproof.judging.pointer import split_pointer
from catalogkit import shipped_checks

from .fixturelib import fixture_paths

CHECKS = shipped_checks()
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
    assert set(families) == {"fm", "fabric", "nvlink", "nvswitch", "ib", "rdma", "pcie", "gpu", "perf", "subnet"}, families


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


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_every_check_declares_an_action_from_the_vocabulary(check):
    assert check.action in ACTIONS, f"{check.id}: action {check.action!r} is not one of {list(ACTIONS)}"


def test_a_check_without_an_action_is_refused_with_its_file_and_path(tmp_path):
    src = next(checks_dir().rglob("gpu.xid.yaml"))
    (tmp_path / "gpu").mkdir()
    bad = tmp_path / "gpu" / "gpu.xid.yaml"
    bad.write_text(src.read_text().replace("action: reboot\n", ""))
    with pytest.raises(InputError) as exc:
        load(tmp_path)
    assert str(exc.value) == f"{bad}:1: at / 'action' is required"
    bad.write_text(src.read_text().replace("action: reboot\n", "action: replace_gpu\n"))
    with pytest.raises(InputError) as exc:
        load(tmp_path)
    assert f"{bad}:5: at /action" in str(exc.value)


#: What an experienced operator does first when the check fails: one per kind of fault.
ACTION_OF = {
    "fm.service_active": "restart_service",  # the daemon stopped
    "imex.service_active": "restart_service",
    "ib.sm_present": "restart_service",
    "fm.config_fabric_mode": "reconfigure",  # a setting
    "pcie.acs_disabled": "reconfigure",
    "rdma.peermem_loaded": "reconfigure",
    "driver.version": "update_software",  # a package
    "ofed.version": "update_software",
    "ib.fw_version": "update_firmware",  # a flash and a cold reset
    "nvswitch.firmware": "update_firmware",
    "gpu.remapped_rows_pending": "reset_gpu",  # NVIDIA: a GPU reset completes the remap
    "nvlink.links_active": "reset_gpu",
    "gpu.fallen_off_bus": "reboot",  # Xid 79: NVIDIA's catalog and GPUd say reboot
    "gpu.recovery_action": "reboot",
    "ib.rate": "reseat_cable",  # the link trained down or went down
    "ib.phys_linkup": "reseat_cable",
    "ib.symbol_errors": "reseat_cable",
    "nvlink.crc_errors": "drain_and_inspect",  # errors growing on a baseboard link
    "gpu.remapped_rows_failure": "drain_and_inspect",  # GPUd: HARDWARE_INSPECTION (RMA)
    "perf.nccl_wrong": "drain_and_inspect",
    "perf.ib_pair_bw": "monitor",  # a pair's figure does not single this host out (perf.ib_pair_at_fault does)
    "perf.collective_busbw": "monitor",  # nor a group's (perf.collective_at_fault does)
    "perf.collective_at_fault": "drain_and_inspect",
    "nvswitch.sxid_nonfatal": "monitor",
}


@pytest.mark.parametrize("check_id", ACTION_OF)
def test_representative_checks_call_for_the_operators_action(check_id):
    assert {c.id: c.action for c in CHECKS}[check_id] == ACTION_OF[check_id]


def test_actions_are_ordered_least_disruptive_first_and_a_host_takes_its_most_severe():
    assert list(ACTIONS)[0] == "monitor" and list(ACTIONS)[-1] == "drain_and_inspect"
    assert rank("reboot") > rank("reset_gpu") > rank("restart_service") > rank("reconfigure") > rank("monitor")
    assert most_severe(["reset_gpu", "monitor", "reboot", "reconfigure"]) == "reboot"
    assert most_severe([]) == ""
    every = {c.action for c in CHECKS}
    assert every == set(ACTIONS), f"actions no check uses: {set(ACTIONS) - every}"
