"""`fabric capture`'s plan: written from a fabric as it is, accepted by load_plan, and clean against that fabric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fabricproof.collectors.subnet import ibnetdiscover
from fabricproof.subnet.capture import plan_from
from fabricproof.subnet.diff import diff
from fabricproof.subnet.names import host_of
from fabricproof.subnet.plan import load_plan

from .fabrics import rail_fabric

HOSTS = [f"gpu{i:03d}" for i in range(1, 13)]
DEFAULT_DESC = "MT4123 ConnectX6   Mellanox Technologies"


def test_a_captured_plan_loads_and_diffs_clean_against_its_fabric(tmp_path):
    fab = rail_fabric(HOSTS, su_size=4, rails=4, spines=4, uplinks=4, cores=2, core_uplinks=2)
    # what real fabrics also hold: HCAs with the vendor's default description, a cable trained at another rate
    for n in range(2):
        fab.node(f"unnamed{n}", "ca", DEFAULT_DESC, 1)
        fab.cable(f"unnamed{n}", 1, "leaf-su3-r3", 20 + n)
    fab.move("gpu005 mlx5_2", 1, "leaf-su2-r2", 1, width="2x", speed="EDR")
    doc = plan_from(fab.subnet, HOSTS, "acceptance")
    path = tmp_path / "fabric-plan.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = load_plan(path)
    assert len(plan.links) == len(fab.subnet.links) == 12 * 4 + 12 * 4 + 4 * 2 + 2
    result = diff(plan, fab.subnet, hosts=HOSTS)
    assert [f for f in result.findings if f.check != "subnet.names_unique"] == []
    # the two vendor-default HCAs are one duplicate-name finding, still; in the plan they are named by GUID
    assert [f.kind for f in result.findings] == ["duplicate"]
    unnamed = {fab.guids["unnamed0"], fab.guids["unnamed1"]}
    assert {lk["b"] for lk in doc["links"] if lk["a"] in unnamed or lk["b"] in unnamed} == {"leaf-su3-r3"}
    assert doc["defaults"] == {"width": "4x", "speed": "HDR"}
    assert {"a": "gpu005 mlx5_2", "a_port": 1, "b": "leaf-su2-r2", "b_port": 1, "width": "2x",
            "speed": "EDR"} in doc["links"]


def test_host_cables_come_first_in_inventory_order_hca_end_first():
    fab = rail_fabric(["b", "a"], su_size=2, rails=1, spines=1, uplinks=1)
    links = plan_from(fab.subnet, ["b", "a"])["links"]
    assert [(lk["a"], lk["b"]) for lk in links] == [("b mlx5_0", "leaf-su1-r0"), ("a mlx5_0", "leaf-su1-r0"),
                                                    ("leaf-su1-r0", "spine-1")]


IB_FABRIC = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "ib-fabric"
#: The corpus's complete dumps (the FAKED excerpt is cut, and refused by the parser); for each, the descriptions
#: several of its nodes share (vendor defaults), which a capture cannot make unique.
DUMPS = {
    "ibnetdiscover-edr-fdr-switchib-sx6012-leading-umad-timeout-line-loopbacks.txt": 0,
    "ibnetdiscover-gb200-node-isolated-ca-no-links-topograph.txt": 0,
    "ibnetdiscover-hdr-director-mcs8500-400sw-2328ca-putty-log-crlf-ufm-ndt.txt": 1,
    "ibnetdiscover-ndr-dgx-h100-superpod-mqm9701-40sw-582ca-topograph.txt": 1,
    "ibnetdiscover-selene-dgx-a100-superpod-compute-hdr-666sw-4341ca.txt": 0,
    "ibnetdiscover-ufm-lab-mixed-fdr-fdr10-edr-hdr-loopback-cables.txt": 0,
}


@pytest.mark.parametrize("name", DUMPS)
def test_a_plan_captured_from_a_real_dump_diffs_clean_against_it(tmp_path, name):
    subnet = ibnetdiscover.parse((IB_FABRIC / name).read_bytes().decode())
    hosts = sorted({named[0] for n in subnet.cas() if (named := host_of(n.desc))}) or ["none"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_from(subnet, hosts)))
    plan = load_plan(path)
    assert len(plan.links) == len(subnet.links)
    found = diff(plan, subnet, hosts=hosts).findings
    assert [f.kind for f in found] == ["duplicate"] * DUMPS[name], [f.sentence[:200] for f in found]
