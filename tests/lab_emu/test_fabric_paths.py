"""The lab fabric's share of a multi-node collective (issue 22.5), pure: the paths the runtime publishes from the fabric
of the moment, and the factor the emulated nccl-tests takes from them (emu.fabricpaths): rail-local sets, sets across
leaves, a missing uplink, crossed rails; no I/O (tests/slurm/test_collective_fabric.py runs it through srun)."""

from __future__ import annotations

import json

import pytest

from fabricproof_lab.emu import fabricpaths, model, multinode
from fabricproof_lab.fabric import edits, topology
from fabricproof_lab.topology import plan_hosts

H100 = plan_hosts(8, "dgx-h100")  # two scalable units of 4: h100-0001..0004 and h100-0005..0008
UNIT1 = [h.name for h in H100[:4]]
UNIT2 = [h.name for h in H100[4:]]
ACROSS = ["h100-0001", "h100-0002", "h100-0005", "h100-0006"]
TARGET = "h100-0003"


@pytest.fixture(scope="module")
def planned() -> topology.Fabric:
    return topology.build(H100)


def paths_with(planned: topology.Fabric, *faults: str) -> dict:
    """The paths as the runtime writes them (a JSON round trip) with `faults` on TARGET."""
    return json.loads(json.dumps(topology.paths(planned, edits.apply(planned, [(TARGET, f) for f in faults]))))


def test_the_healthy_fabric_carries_every_set_in_full(planned) -> None:
    """Rail-local within a unit; across units through the spines, which the plan's uplinks carry in full."""
    paths = paths_with(planned)
    assert paths["rails"][TARGET] == {str(r): f"leaf-su1-r{r}" for r in range(8)}
    assert paths["leaf_rail"]["leaf-su2-r5"] == 5 and set(paths["uplinks"].values()) == {1.0}
    assert fabricpaths.factor(paths, UNIT1) == fabricpaths.factor(paths, ACROSS) == 1.0
    assert fabricpaths.factor(None, ACROSS) == 1.0  # a lab without a fabric


def test_a_missing_uplink_lowers_only_sets_across_its_leaf_in_proportion(planned) -> None:
    paths = paths_with(planned, "subnet-uplink-missing")  # the first of leaf-su1-r0's two uplinks
    assert paths["uplinks"]["leaf-su1-r0"] == 0.5 and paths["uplinks"]["leaf-su1-r1"] == 1.0
    assert fabricpaths.factor(paths, ACROSS) == 0.5
    assert fabricpaths.factor(paths, UNIT1) == 1.0 and fabricpaths.factor(paths, UNIT2) == 1.0  # rail-local
    # an unplanned extra uplink gives no more than the plan's full share
    extra = paths_with(planned, "subnet-extra-link")
    assert extra["uplinks"]["leaf-su1-r0"] == 1.5 and fabricpaths.factor(extra, ACROSS) == 1.0


def test_crossed_rails_send_rail_traffic_through_the_spines_for_every_set_with_that_host(planned) -> None:
    paths = paths_with(planned, "subnet-rails-swapped")  # mlx5_0 and mlx5_1 of TARGET on each other's leaf
    assert paths["rails"][TARGET]["0"] == "leaf-su1-r1" and paths["rails"][TARGET]["1"] == "leaf-su1-r0"
    assert fabricpaths.factor(paths, UNIT1) == fabricpaths.SPINE_DETOUR
    assert fabricpaths.factor(paths, [TARGET, "h100-0005"]) == fabricpaths.SPINE_DETOUR
    assert fabricpaths.factor(paths, [h for h in UNIT1 if h != TARGET]) == 1.0
    assert fabricpaths.factor(paths, [TARGET]) == 1.0  # one host: nothing between nodes


def test_an_unplugged_hca_adds_no_leaf(planned) -> None:
    """Its port is Down on the node (its own HCA bandwidth drops there); the fabric adds nothing for it."""
    paths = paths_with(planned, "subnet-hca-unplugged")
    assert paths["rails"][TARGET]["2"] is None and fabricpaths.factor(paths, UNIT1) == 1.0


def test_the_emulated_collective_over_infiniband_takes_the_fabrics_share(planned) -> None:
    """The figure is the bottleneck of the set: the fabric's factor lowers the HCAs' part; one NVLink domain (GB200
    with MNNVL on) never touches the leaves."""
    nodes = [multinode.summary(model.new_node(h.profile, h.index, h.rack, h.name, h.address), 8)
             for h in H100 if h.name in ACROSS]
    healthy, _ = multinode.bottleneck(nodes, "all_reduce_perf", True, paths_with(planned))
    missing, mnnvl = multinode.bottleneck(nodes, "all_reduce_perf", True, paths_with(planned, "subnet-uplink-missing"))
    assert not mnnvl and missing == pytest.approx(healthy * 0.5)
    assert multinode.bottleneck(nodes, "all_reduce_perf", True, None)[0] == healthy
