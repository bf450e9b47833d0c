"""Slurm drain/resume decisions for node-local checks (pure): only fabricproof's own drains are undone."""

from __future__ import annotations

from fabricproof import slurm
from fabricproof.slurm import NodeState, decide, parse_show_node

SHOW = """NodeName=h100-0001 Arch=x86_64 CoresPerSocket=56
   CPUAlloc=0 CPUEfctv=224 CPUTot=224 CPULoad=0.12
   State=IDLE+DRAIN ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=gpu
   Reason=fabricproof check: nvlink.links_active,nvlink.topology [root@2025-01-06T09:00:00]

"""


def test_parse_show_node_strips_the_user_and_time_suffix():
    st = parse_show_node(SHOW, "h100-0001")
    assert st == NodeState("h100-0001", "IDLE+DRAIN", "fabricproof check: nvlink.links_active,nvlink.topology")
    assert st.drained and st.ours


def test_parse_show_node_without_reason():
    st = parse_show_node(SHOW.replace("State=IDLE+DRAIN", "State=MIXED").split("   Reason")[0], "n")
    assert st.state == "MIXED" and st.reason is None and not st.drained and not st.ours


def test_drain_argv_is_one_element_per_setting_and_names_the_checks():
    argv = slurm.drain_argv("h100-0001", ["nvlink.topology", "fm.service_active", "nvlink.topology"])
    assert argv == ["scontrol", "update", "nodename=h100-0001", "state=drain",
                    "reason=fabricproof check: fm.service_active,nvlink.topology"]


def test_long_reasons_are_shortened_with_a_count():
    ids = [f"family.check_number_{i:02d}" for i in range(20)]
    reason = slurm.drain_reason(ids)
    assert len(reason) <= slurm.MAX_REASON and reason.startswith("fabricproof check: family.check_number_00,")
    assert reason.endswith(" more")


def test_failing_node_is_drained_unless_someone_else_drained_it():
    idle = NodeState("n", "IDLE", None)
    assert decide(idle, ["ib.rate"], passed=False).argv == slurm.drain_argv("n", ["ib.rate"])
    assert decide(idle, ["ib.rate"], passed=False).new_drain  # the drain breaker decides
    ours = NodeState("n", "DRAINED", "fabricproof check: fm.version")
    again = decide(ours, ["ib.rate"], passed=False)
    assert again.argv == slurm.drain_argv("n", ["ib.rate"]) and not again.new_drain
    # The same checks still failing: no update, which would restamp the drain time the breaker counts by.
    same = decide(NodeState("n", "DRAINED", "fabricproof check: ib.rate"), ["ib.rate"], passed=False)
    assert same.argv is None and same.message == "n stays drained: fabricproof check: ib.rate"
    theirs = NodeState("n", "IDLE+DRAIN", "bad DIMM, ticket 4711")
    action = decide(theirs, ["ib.rate"], passed=False)
    assert action.argv is None and "someone else" in action.message


def test_passing_node_is_resumed_only_from_our_drain():
    ours = NodeState("n", "IDLE+DRAIN", "fabricproof check: ib.rate")
    assert decide(ours, [], passed=True).argv == slurm.resume_argv("n")
    kept = decide(NodeState("n", "IDLE+DRAIN", "maintenance"), [], passed=True)
    assert kept.argv is None and "not this check's" in kept.message
    assert decide(NodeState("n", "IDLE", None), [], passed=True).argv is None


def test_a_rollouts_drain_is_not_the_health_checks_to_lift():
    # playbooks/drain.yml's reason: a node passing its health check mid-change stays out of service.
    reason = "fabricproof: driver-fm-535.183.01 run 20250106T090000-driver-fm-535.183.01-beef"
    rollout = NodeState("n", "IDLE+DRAIN", reason)
    assert not rollout.ours
    kept = decide(rollout, [], passed=True)
    assert kept.argv is None and "stays drained: the reason is not this check's" in kept.message
    failing = decide(rollout, ["ib.rate"], passed=False)
    assert failing.argv is None and "someone else" in failing.message  # its reason stays the rollout's


def test_incomplete_run_touches_nothing():
    assert decide(NodeState("n", "IDLE+DRAIN", "fabricproof check: ib.rate"), [], passed=False).argv is None


def test_the_drain_reason_names_the_nodes_action_before_its_checks_and_keeps_it_when_shortened():
    assert slurm.drain_reason(["gpu.xid", "gpu.fallen_off_bus"], "reboot") == \
        "fabricproof check: reboot: gpu.fallen_off_bus,gpu.xid"
    long = slurm.drain_reason([f"family.check_number_{i:02d}" for i in range(20)], "drain_and_inspect")
    assert len(long) <= slurm.MAX_REASON and long.startswith("fabricproof check: drain_and_inspect: family.check_")
    action = decide(NodeState("n", "IDLE", None), ["ib.rate"], passed=False, action="reseat_cable")
    assert action.argv[-1] == "reason=fabricproof check: reseat_cable: ib.rate" and NodeState(
        "n", "DRAINED", action.reason).ours  # the prefix the breaker counts by and resume looks for is intact
