"""The real director fabric against its real NDT plan: the diff finds what NVIDIA UFM's NDT plugin reports for the same
pair (ndt-expected-report-director-fabric-miswired-missing.json: 2 miswired, 2 missing, 107 not in the plan)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from fabricproof.collectors.subnet import ibnetdiscover
from fabricproof.subnet.diff import diff
from fabricproof.subnet.names import host_of
from fabricproof.subnet.plan import load_plan

IB_FABRIC = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "ib-fabric"
DUMP = IB_FABRIC / "ibnetdiscover-hdr-director-mcs8500-400sw-2328ca-putty-log-crlf-ufm-ndt.txt"
PLANS = ("ndt-plan-switch-to-host-2223-links-director-fabric.csv", "ndt-plan-switch-to-switch-6390-links-director-fabric.csv")


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    plan_file = tmp_path_factory.mktemp("plan") / "sat11.yaml"
    plan_file.write_text("kind: FabricPlan\nversion: 1\nname: sat11\ninclude:\n"
                         + "".join(f"  - {IB_FABRIC / name}\n" for name in PLANS))
    plan = load_plan(plan_file)
    subnet = ibnetdiscover.parse(DUMP.read_bytes().decode())
    hosts = sorted({named[0] for n in subnet.cas() if (named := host_of(n.desc))}
                   | {"SAT111090201020", "SAT111090201021"})
    return plan, diff(plan, subnet, hosts=hosts)


def test_the_ndt_plan_pair_lists_some_cables_from_both_ends_and_they_count_once(result):
    plan, _ = result
    assert len(plan.links) == 2223 + 6390 // 2  # the switch file lists each of its 3,195 cables from both ends


def test_the_diff_finds_what_the_ndt_plugin_reports(result):
    _, found = result
    report = json.loads((IB_FABRIC / "ndt-expected-report-director-fabric-miswired-missing.json").read_text())["report"]
    kinds = Counter(f.kind for f in found.findings)
    assert kinds == {"miswired": len(report["miss_wired"]), "missing": len(report["missing_in_ufm"]),
                     "unplanned": len(report["missing_in_ndt"]), "duplicate": 1}
    assert sorted(f.sentence for f in found.findings if f.kind == "miswired") == [
        "SAT111090201019 ibp213s0f0 port 1 is on sat11-0101-0902-01ib0 port 16; the plan puts it on "
        "sat11-0101-0902-01ib0 port 17",
        "sat11-0101-0902-01ib0 port 15 holds SAT111090201019 ibp203s0f0 port 1; the plan puts SAT111090201019 "
        "ibp203s0f1 port 1 there, which is not in the fabric"]
    assert sorted(f.hosts for f in found.findings if f.kind == "missing") == [("SAT111090201020",),
                                                                             ("SAT111090201021",)]
    # not in the plan: the 103 HCAs left with the vendor's description and the UFM hosts' 4; a director's backplane
    # (its leaf-blade to spine-blade links) is no cabling
    unplanned = Counter(f.ends[0].rsplit(" port", 1)[0] for f in found.findings if f.kind == "unplanned")
    assert unplanned == {"MT4123 ConnectX6   Mellanox Technologies": 103, "sat11-0101-0902-01ufm HCA-1": 1,
                         "sat11-0101-0902-01ufm HCA-2": 1, "sat11-0101-0902-02ufm HCA-1": 1,
                         "sat11-0101-0902-02ufm HCA-2": 1}


NDR = IB_FABRIC / "ibnetdiscover-ndr-dgx-h100-superpod-mqm9701-40sw-582ca-topograph.txt"


def test_sharp_aggregation_nodes_share_their_description_by_design_and_vendor_defaults_stay_reported(tmp_path):
    """The NDR SuperPOD dump: each of its 40 Quantum switches has a SHARP aggregation node, all 'Mellanox Technologies
    Aggregation Node'; 69 HCAs kept the vendor default 'MT4129 ConnectX7   Mellanox Technologies'."""
    from fabricproof.subnet.capture import plan_from

    subnet = ibnetdiscover.parse(NDR.read_bytes().decode())
    hosts = sorted({named[0] for n in subnet.cas() if (named := host_of(n.desc))})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_from(subnet, hosts)))
    dupes = [f for f in diff(load_plan(path), subnet, hosts=hosts).findings if f.check == "subnet.names_unique"]
    assert [(f.ends, f.sentence.split(" (")[0]) for f in dupes] == [
        (("MT4129 ConnectX7   Mellanox Technologies",),
         "69 nodes are named 'MT4129 ConnectX7   Mellanox Technologies'")]
