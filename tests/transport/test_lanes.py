"""Planning a host's lanes (pure): a tool's commands in sequence, the rest beside them; timeouts from durations."""

from __future__ import annotations

from fabricproof.collectors import COLLECTORS, default_collectors
from fabricproof.model import Command
from fabricproof.transport import lanes


def cmd(name: str, tool: str = "", typical: float = 0.0) -> Command:
    return Command((name,), 30, name, tool, typical)


def test_a_tools_commands_share_one_lane_in_order_and_the_rest_pack_beside_the_longest_chain():
    commands = [cmd("q", "nvidia-smi", 0.6), cmd("ver"), cmd("s", "nvidia-smi", 0.3), cmd("fw", "nvfwupd", 20.0),
                cmd("mlx", "mlxfwmanager", 4.0), cmd("ib", "ibstat", 0.05)]
    plan = lanes.plan(commands)
    assert sorted(i for lane in plan for i in lane) == list(range(len(commands)))  # every command once
    lane_of = {i: k for k, lane in enumerate(plan) for i in lane}
    assert lane_of[0] == lane_of[2] and plan[lane_of[0]].index(0) < plan[lane_of[0]].index(2)
    assert plan[lane_of[3]] == (3,)  # the 20 s chain alone; everything else fits beside it
    assert len(plan) == 2
    assert lanes.longest_chain_s(commands) == 20.0


def test_without_known_durations_commands_still_spread_but_never_over_max_lanes():
    plan = lanes.plan([cmd(f"c{i}") for i in range(26)])
    assert len(plan) == lanes.MAX_LANES and sorted(i for lane in plan for i in lane) == list(range(26))
    assert lanes.plan([cmd("one")]) == ((0,),) and lanes.plan([]) == ()


def test_the_standard_set_on_a_real_node_takes_its_longest_chain():
    commands = [Command(c.argv, c.timeout_s, c.id, c.lock, c.typical_s) for c in default_collectors()]
    assert lanes.longest_chain_s(commands) < sum(c.typical_s for c in commands) / 1.3
    nvsmi = [i for i, c in enumerate(commands) if c.tool == "nvidia-smi"]
    assert len(nvsmi) >= 5 and any(set(nvsmi) <= set(lane) for lane in lanes.plan(commands))


def test_default_timeouts_come_from_measured_durations():
    assert COLLECTORS["nvidia_smi_q"].timeout_s == 30.0  # above 8 GPUs x 3 s of init without persistence mode
    assert COLLECTORS["nvswitch_firmware"].timeout_s == 180.0 and COLLECTORS["nvswitch_firmware"].typical_s == 20.0
    assert COLLECTORS["flint"].lock == "mlxfwmanager" and COLLECTORS["cmdline"].lock == ""
    assert all(c.timeout_s >= 30 for c in COLLECTORS.values())


def test_probes_never_run_at_once_on_a_host():
    probes = [c for c in COLLECTORS.values() if c.loads_fabric]
    assert len(probes) >= 2 and {c.lock for c in probes} == {"fabric-load"}
    commands = [Command(c.argv, c.timeout_s, c.id, c.lock, c.typical_s) for c in probes]
    assert len(lanes.plan(commands)) == 1
