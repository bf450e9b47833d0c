"""The fabric against its plan: every kind of finding, in an operator's words, on the hosts it affects (pure: fabrics
built as Subnets by tests/subnet/fabrics.py)."""

from __future__ import annotations

import copy
import dataclasses

import jsonschema
import pytest
import yaml
from fabricproof import documents, factschema
from fabricproof.subnet.capture import plan_from
from fabricproof.subnet.checks import CHECKS
from fabricproof.subnet.diff import Finding, diff, merge_facts
from fabricproof.subnet.model import SubnetManager
from fabricproof.subnet.plan import Plan, from_document

from .fabrics import Builder, rail_fabric

HOSTS = [f"node{i:02d}" for i in range(1, 9)]
RAILS = """\
kind: FabricPlan
version: 1
name: rails
defaults: {width: 4x, speed: HDR}
rails: {hosts: {group: gpu}, su_size: 4, count: 2, leaf: "leaf-su{su}-r{rail}", spines: {name: "spine-{n}", count: 2},
        uplinks: 2}
"""


def rule_plan() -> Plan:
    return from_document(documents.parse_yaml(RAILS, "plan.yaml"), {"gpu": HOSTS})


def captured_plan() -> Plan:
    """The same cabling as an explicit cable list, as `fabric capture` writes it from the healthy fabric."""
    text = yaml.safe_dump(plan_from(fabric().subnet, HOSTS, "captured"), sort_keys=False)
    return from_document(documents.parse_yaml(text, "captured.yaml"))


def fabric() -> Builder:
    """8 hosts in 2 SUs of 4, 2 rails, 4 leaves, 2 uplinks each over 2 spines: the plan's fabric."""
    return rail_fabric(HOSTS, su_size=4, rails=2, spines=2, uplinks=2)


def found(fab: Builder, plan: Plan | None = None, **kw) -> list[Finding]:
    return diff(plan or rule_plan(), fab.subnet, hosts=HOSTS, **kw).findings


def one(findings: list[Finding], check: str) -> Finding:
    hits = [f for f in findings if f.check == check]
    assert len(hits) == 1, findings
    return hits[0]


@pytest.mark.parametrize("plan", [rule_plan, captured_plan], ids=["rule", "explicit"])
def test_the_planned_fabric_diffs_clean_and_every_host_gets_a_passing_fragment(plan):
    result = diff(plan(), fabric().subnet, hosts=HOSTS)
    assert result.findings == []
    facts = result.host_facts()
    assert sorted(facts) == HOSTS
    assert facts["node05"] == {"plan": plan().name, "cables": 2, **{c: [] for c in CHECKS}}


def test_host_fragments_fit_the_facts_schema_and_merge_with_their_collector_record():
    fab = fabric()
    fab.move("node01 mlx5_0", 1, "leaf-su1-r0", 9)
    frags = diff(rule_plan(), fab.subnet, hosts=HOSTS).host_facts()
    schema = factschema.build()
    for host, frag in frags.items():
        doc = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": host, "collectors": {}}
        merge_facts(doc, frag)
        jsonschema.validate(doc, schema)
        assert doc["collectors"]["subnet"] == {"status": "ok"}
    assert frags["node01"]["cable_placement"] == [
        "node01 mlx5_0 port 1 is on leaf-su1-r0 port 9; the plan puts it on leaf-su1-r0 port 1"]


def test_two_rails_crossed_on_one_host_are_one_swap_naming_both_cables():
    fab = fabric()
    fab.unplug("node01 mlx5_0", 1)
    fab.unplug("node01 mlx5_1", 1)
    fab.cable("node01 mlx5_0", 1, "leaf-su1-r1", 1)
    fab.cable("node01 mlx5_1", 1, "leaf-su1-r0", 1)
    findings = found(fab)
    swap = one(findings, "subnet.cable_placement")
    assert swap == Finding(
        "subnet.cable_placement", "swapped",
        ("node01 mlx5_0 port 1", "node01 mlx5_1 port 1", "leaf-su1-r0 port 1", "leaf-su1-r1 port 1"), ("node01",),
        "node01 mlx5_0 port 1 and node01 mlx5_1 port 1 are swapped: node01 mlx5_0 port 1 is on leaf-su1-r1 port 1 "
        "and node01 mlx5_1 port 1 on leaf-su1-r0 port 1; the plan puts them the other way round")
    # and each HCA sits on the other rail's leaf; nothing else is wrong
    assert sorted((f.check, f.sentence) for f in findings if f is not swap) == [
        ("subnet.rail_aligned", "node01 mlx5_0 port 1 (rail 0) is on leaf-su1-r1 port 1, a rail-1 leaf"),
        ("subnet.rail_aligned", "node01 mlx5_1 port 1 (rail 1) is on leaf-su1-r0 port 1, a rail-0 leaf")]


def test_two_hosts_cables_crossed_on_one_leaf_are_one_swap_affecting_both():
    fab = fabric()
    fab.unplug("node01 mlx5_0", 1)
    fab.unplug("node02 mlx5_0", 1)
    fab.cable("node01 mlx5_0", 1, "leaf-su1-r0", 2)
    fab.cable("node02 mlx5_0", 1, "leaf-su1-r0", 1)
    (swap,) = found(fab)
    assert (swap.kind, swap.hosts) == ("swapped", ("node01", "node02"))


def test_an_hca_on_the_wrong_leaf_port_is_miswired_in_the_operators_words():
    fab = fabric()
    fab.move("node02 mlx5_0", 1, "leaf-su1-r0", 9)
    assert found(fab) == [Finding(
        "subnet.cable_placement", "miswired",
        ("node02 mlx5_0 port 1", "leaf-su1-r0 port 9", "leaf-su1-r0 port 2"), ("node02",),
        "node02 mlx5_0 port 1 is on leaf-su1-r0 port 9; the plan puts it on leaf-su1-r0 port 2")]


def test_an_hca_on_another_rails_leaf_is_miswired_and_off_its_rail():
    fab = fabric()
    fab.move("node03 mlx5_0", 1, "leaf-su1-r1", 9)
    findings = found(fab)
    assert one(findings, "subnet.cable_placement").sentence == (
        "node03 mlx5_0 port 1 is on leaf-su1-r1 port 9; the plan puts it on leaf-su1-r0 port 3")
    rail = one(findings, "subnet.rail_aligned")
    assert (rail.kind, rail.hosts, rail.ends) == ("rail", ("node03",), ("node03 mlx5_0 port 1", "leaf-su1-r1 port 9"))


def test_the_rail_map_in_a_hosts_facts_decides_its_hcas_rails():
    """A host whose facts number its HCAs the other way round: its cables, as planned by name, cross rails."""
    findings = found(fabric(), rails={"node04": {"mlx5_0": 1, "mlx5_1": 0}})
    assert sorted(f.sentence for f in findings) == [
        "node04 mlx5_0 port 1 (rail 1) is on leaf-su1-r0 port 4, a rail-0 leaf",
        "node04 mlx5_1 port 1 (rail 0) is on leaf-su1-r1 port 4, a rail-1 leaf"]


def test_a_spine_uplink_on_the_wrong_spine_port_affects_every_host_on_its_leaf():
    fab = fabric()
    fab.move("leaf-su1-r0", 5, "spine-1", 9)
    assert found(fab) == [Finding(
        "subnet.cable_placement", "miswired", ("leaf-su1-r0 port 5", "spine-1 port 9", "spine-1 port 1"),
        ("node01", "node02", "node03", "node04"),
        "leaf-su1-r0 port 5 is on spine-1 port 9; the plan puts it on spine-1 port 1")]


def test_a_missing_spine_uplink_is_missing_or_down_when_its_port_polls():
    fab = fabric()
    fab.unplug("leaf-su2-r1", 6)
    (missing,) = found(fab)
    assert (missing.check, missing.kind, missing.hosts) == (
        "subnet.cable_present", "missing", ("node05", "node06", "node07", "node08"))
    assert missing.sentence == ("the cable leaf-su2-r1 port 6 to spine-2 port 4 is missing: neither port shows a link "
                                "(planned at plan.yaml:5)")
    fab.idle("leaf-su2-r1", 6)
    (down,) = found(fab)
    assert (down.kind, down.sentence) == ("down", "the cable leaf-su2-r1 port 6 to spine-2 port 4 is down: "
                                                  "leaf-su2-r1 port 6 is Down/Polling (planned at plan.yaml:5)")


def test_a_planned_host_the_fabric_lacks_is_missing_on_that_host():
    hosts = [*HOSTS, "node09"]
    plan = from_document(documents.parse_yaml(RAILS.replace("su_size: 4", "su_size: 5"), "plan.yaml"),
                         {"gpu": hosts})
    fab = rail_fabric(HOSTS, su_size=5, rails=2, spines=2, uplinks=2)
    findings = diff(plan, fab.subnet, hosts=hosts).findings
    assert {(f.check, f.kind, f.hosts) for f in findings} == {("subnet.cable_present", "missing", ("node09",))}
    assert sorted(f.sentence for f in findings) == [
        f"node09 mlx5_{r} is not in the fabric, so its cable node09 mlx5_{r} port 1 to leaf-su2-r{r} port 4 is "
        "missing (planned at plan.yaml:5)" for r in (0, 1)]


def test_a_stray_hca_in_a_planned_port_is_unplanned_and_the_planned_cable_missing():
    fab = fabric()
    fab.unplug("node04 mlx5_1", 1)
    fab.ca("spare01 mlx5_0")
    fab.cable("spare01 mlx5_0", 1, "leaf-su1-r1", 4)
    findings = found(fab)
    assert one(findings, "subnet.cable_present").hosts == ("node04",)
    stray = one(findings, "subnet.cable_unplanned")
    assert stray.sentence == "spare01 mlx5_0 port 1 is cabled to leaf-su1-r1 port 4, which the plan gives to node04 mlx5_1 port 1"
    assert stray.hosts == ("node01", "node02", "node03", "node04")  # no inventory host's HCA: the leaf's hosts


def test_an_unplanned_cable_between_leaves_affects_both_leaves_hosts():
    fab = fabric()
    fab.cable("leaf-su1-r0", 10, "leaf-su2-r0", 10)
    assert found(fab) == [Finding(
        "subnet.cable_unplanned", "unplanned", ("leaf-su1-r0 port 10", "leaf-su2-r0 port 10"), tuple(HOSTS),
        "leaf-su1-r0 port 10 is cabled to leaf-su2-r0 port 10, which the plan does not have")]


def test_a_link_below_the_planned_width_or_speed():
    fab = fabric()
    fab.move("node03 mlx5_1", 1, "leaf-su1-r1", 3, width="1x")
    fab.move("leaf-su2-r0", 5, "spine-1", 3, speed="EDR")
    findings = found(fab)
    assert [(f.check, f.kind, f.hosts, f.sentence) for f in findings] == [
        ("subnet.link_width", "width", ("node03",),
         "the cable node03 mlx5_1 port 1 to leaf-su1-r1 port 3 runs at 1x width; the plan says 4x"),
        ("subnet.link_speed", "speed", ("node05", "node06", "node07", "node08"),
         "the cable leaf-su2-r0 port 5 to spine-1 port 3 runs at EDR speed; the plan says HDR")]


def test_a_link_below_what_both_ends_could_run_where_the_plan_sets_no_rate():
    plan = from_document(documents.parse_yaml(RAILS.replace("defaults: {width: 4x, speed: HDR}\n", ""), "p.yaml"),
                         {"gpu": HOSTS})
    fab = fabric()
    fab.move("node07 mlx5_0", 1, "leaf-su2-r0", 3, speed="HDR", could_speed="NDR", could_width="4x")
    fab.move("node08 mlx5_0", 1, "leaf-su2-r0", 4, width="4x", could_width="4x")
    (low,) = found(fab, plan)
    assert (low.check, low.sentence) == (
        "subnet.link_speed", "the cable node07 mlx5_0 port 1 to leaf-su2-r0 port 3 runs at HDR speed; both ends "
        "could run NDR")


def test_duplicate_node_descriptions_name_the_guids():
    fab = fabric()
    fab.ca("node06 mlx5_0")
    dup = one(found(fab), "subnet.names_unique")
    guids = sorted(g for g, n in fab.subnet.nodes.items() if n.desc == "node06 mlx5_0")
    assert (dup.kind, dup.ends, dup.hosts) == ("duplicate", ("node06 mlx5_0",), ("node06",))
    assert dup.sentence == (f"2 nodes are named 'node06 mlx5_0' (GUIDs {guids[0]}, {guids[1]}): give each its own "
                            "description")


def describe(fab: Builder, name: str, desc: str) -> None:
    """The node called `name` answers with another node description (its rdma-ndd wrote the wrong one)."""
    guid = fab.guids[name]
    fab.subnet.nodes[guid] = dataclasses.replace(fab.subnet.nodes[guid], desc=desc)


@pytest.mark.parametrize("order", ["first", "second"])
def test_a_host_hca_answering_with_its_neighbours_description_is_one_names_finding_naming_both_ports(order):
    """node03 mlx5_1 describes itself as node03 mlx5_0: the diff tells the two apart by their switch ends, whichever
    the fabric lists first, and reports one finding, in place of a misplaced, missing, unplanned or off-rail cable."""
    fab = fabric()
    if order == "first":
        describe(fab, "node03 mlx5_1", "node03 mlx5_0")
    else:  # the impostor listed before the real one
        real = fab.guids["node03 mlx5_0"]
        fab.subnet.nodes[real] = fab.subnet.nodes.pop(real)
        describe(fab, "node03 mlx5_1", "node03 mlx5_0")
    assert found(fab) == [Finding(
        "subnet.names_unique", "duplicate", ("leaf-su1-r1 port 3", "leaf-su1-r0 port 3", "node03 mlx5_1 port 1"),
        ("node03",),
        "leaf-su1-r1 port 3 holds a node describing itself as node03 mlx5_0, as does the one on leaf-su1-r0 port 3; "
        "the plan puts node03 mlx5_1 there: fix its node description")]


def test_switch_counters_that_grew_over_the_window_name_the_port_and_its_cable():
    fab = fabric()
    end = fab.end("leaf-su2-r1", 2)
    before = copy.deepcopy(fab.subnet)
    before.counters[end] = {"SymbolErrorCounter": 1, "PortRcvErrors": 4}
    fab.subnet.counters[end] = {"SymbolErrorCounter": 13, "LinkDownedCounter": 1, "PortRcvErrors": 4}
    fab.subnet.counters[fab.end("leaf-su2-r1", 3)] = {"SymbolErrorCounter": 2}
    before.counters[fab.end("leaf-su2-r1", 3)] = {"SymbolErrorCounter": 2}
    assert found(fab) == []  # one snapshot is no window
    (grew,) = found(fab, counters_before=before)
    assert (grew.check, grew.kind, grew.hosts) == ("subnet.switch_errors", "counters", ("node06",))
    assert grew.sentence == ("leaf-su2-r1 port 2 (to node06 mlx5_1 port 1): SymbolErrorCounter grew by 12, "
                             "LinkDownedCounter by 1 over the window")


def test_exactly_one_master_sm():
    fab = fabric()
    fab.subnet.sms.append(SubnetManager("0x0c42a103000000ff", 9, 14, "SMINFO_MASTER"))
    two = one(found(fab), "subnet.sm_master")
    assert two.hosts == tuple(HOSTS) and two.sentence.startswith("2 subnet managers answer as master: ")
    fab.subnet.sms = [SubnetManager("0x0c42a103000000ff", 9, 14, "SMINFO_STANDBY")]
    assert one(found(fab), "subnet.sm_master").sentence == (
        "no subnet manager answered as master (1 heard: 0x0c42a103000000ff SMINFO_STANDBY)")
    fab.subnet.sms = []  # sminfo did not answer: its collector's record says so, and the check is unjudged by it
    assert found(fab) == []


def test_inventory_hosts_match_descriptions_case_insensitively_and_keep_their_spelling():
    fab = fabric()
    fab.move("node02 mlx5_0", 1, "leaf-su1-r0", 9)
    upper = [h.upper() for h in HOSTS]
    plan = from_document(documents.parse_yaml(RAILS, "plan.yaml"), {"gpu": upper})
    (f,) = diff(plan, fab.subnet, hosts=upper).findings
    assert f.hosts == ("NODE02",)


def test_a_directors_backplane_is_no_cabling_but_a_cable_between_two_boxes_is():
    fab = fabric()
    for name in ("dir-A/L01/U1", "dir-A/S01/U1", "dir-B/S01/U1"):
        box, blade, asic = name.split("/")
        fab.node(name, "switch", f"MF0;{box}:MCS8500/{blade}/{asic}", 40)
    fab.cable("dir-A/L01/U1", 21, "dir-A/S01/U1", 1)
    assert found(fab) == []
    fab.cable("dir-A/L01/U1", 22, "dir-B/S01/U1", 1)
    assert [f.ends for f in found(fab)] == [("dir-A/L01/U1 port 22", "dir-B/S01/U1 port 1")]


FAULTS = {
    "swap": lambda fab: (fab.unplug("node05 mlx5_0", 1), fab.unplug("node05 mlx5_1", 1),
                         fab.cable("node05 mlx5_0", 1, "leaf-su2-r1", 1), fab.cable("node05 mlx5_1", 1, "leaf-su2-r0", 1)),
    "port": lambda fab: fab.move("node02 mlx5_1", 1, "leaf-su1-r1", 8),
    "uplink": lambda fab: fab.unplug("leaf-su1-r1", 6),
    "width": lambda fab: fab.move("node07 mlx5_0", 1, "leaf-su2-r0", 3, width="1x"),
    "extra": lambda fab: fab.cable("leaf-su1-r0", 10, "leaf-su1-r1", 10),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_the_rule_and_its_explicit_cable_list_judge_alike(fault):
    fab = fabric()
    FAULTS[fault](fab)
    by_rule = [(f.check, f.kind, f.ends, f.hosts) for f in found(fab, rule_plan())]
    by_list = [(f.check, f.kind, f.ends, f.hosts) for f in found(fab, captured_plan())]
    assert by_rule and by_rule == by_list


def test_the_subnet_checks_fail_a_host_with_the_diffs_sentences_and_pass_a_clean_one():
    from fabricproof.judging.baseline import Baseline
    from fabricproof.judging.catalog import load
    from fabricproof.judging.evaluate import evaluate
    from fabricproof.model import Outcome

    fab = fabric()
    fab.move("node02 mlx5_0", 1, "leaf-su1-r0", 9)
    fab.move("node02 mlx5_1", 1, "leaf-su1-r1", 2, width="2x")
    result = diff(rule_plan(), fab.subnet, hosts=HOSTS)
    facts = {}
    for host, frag in result.host_facts().items():
        facts[host] = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": host, "collectors": {}}
        merge_facts(facts[host], frag)
    checks = [c for c in load() if c.family == "subnet"]
    assert sorted(c.id.split(".")[1] for c in checks) == sorted(CHECKS)
    report = evaluate(facts, Baseline("b", {}), checks)
    failed = {(r.host, r.check_id): [f.text for f in r.findings] for r in report.results if r.outcome is Outcome.FAIL}
    assert failed == {
        ("node02", "subnet.cable_placement"): [
            "node02 mlx5_0 port 1 is on leaf-su1-r0 port 9; the plan puts it on leaf-su1-r0 port 2"],
        ("node02", "subnet.link_width"): [
            "the cable node02 mlx5_1 port 1 to leaf-su1-r1 port 2 runs at 2x width; the plan says 4x"]}
    assert {r.outcome for r in report.results if r.host != "node02"} == {Outcome.PASS}
