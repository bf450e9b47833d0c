"""The drain breaker's judgement (pure): Slurm's node list read, the limit, the window, the order of drains, the
latch and the reset; the real Slurm runs are in tests/slurm/test_breaker.py."""

from __future__ import annotations

from datetime import datetime

import pytest
from fabricproof import breaker
from fabricproof.breaker import ClusterNode, Limit, judge, parse_limit, parse_nodes, parse_window
from fabricproof.errors import InputError

# `scontrol show node -o` of Debian's Slurm 22.05 (the test cluster's), shortened in the middle: a node drained by
# the health check with a Comment and an Extra after its reason, one in service, one in two partitions.
SHOW = (
    "NodeName=n01 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.51 NodeAddr=127.0.0.1 "
    "OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 State=IDLE+DRAIN ThreadsPerCore=1 "
    "Partitions=debug  BootTime=2026-12-02T05:26:04 ExtSensorsTemp=n/s "
    "Reason=fabricproof check: a,b [root@2026-12-02T05:32:25] Comment=fabricproof breaker: reset 123 by root "
    "Extra=xx yy\n"
    "NodeName=n02 Arch=x86_64 CoresPerSocket=1  State=IDLE ThreadsPerCore=1 Partitions=debug  ExtSensorsTemp=n/s\n"
    "NodeName=n03 Arch=x86_64 State=MIXED+DRAIN Partitions=debug,gpu  ExtSensorsTemp=n/s "
    "Reason=bad DIMM, ticket 4711 [ops@2026-12-02T05:30:00] Comment=rack 7, slot 3\n"
)


def _at(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp())


def test_scontrol_node_lines_give_reason_time_partitions_and_comment():
    n01, n02, n03 = parse_nodes(SHOW)
    assert n01 == ClusterNode("n01", "IDLE+DRAIN", "fabricproof check: a,b", _at("2026-12-02T05:32:25"), ("debug",),
                              "fabricproof breaker: reset 123 by root")
    assert n01.counted and n01.marker == ("reset", 123, "by root") and n01.comment_free
    assert n02 == ClusterNode("n02", "IDLE", None, None, ("debug",), None) and not n02.counted and n02.comment_free
    assert n03.partitions == ("debug", "gpu") and n03.reason == "bad DIMM, ticket 4711" and not n03.counted
    assert n03.comment == "rack 7, slot 3" and not n03.comment_free  # a person's Comment is never overwritten


def test_limit_is_a_share_rounded_down_never_below_one_node_or_a_count():
    assert parse_limit("10%").nodes(64) == 6 and parse_limit("20%").nodes(10) == 2
    assert parse_limit("10%").nodes(3) == 1  # a small partition may still drain one node
    assert parse_limit("6").nodes(64) == 6 and parse_limit("12.5%").nodes(16) == 2
    for bad in ("0", "0%", "150%", "-1", "ten", "", "nan%"):
        with pytest.raises(InputError, match="--breaker"):
            parse_limit(bad)
    assert parse_window("1h") == 3600 and parse_window("90") == 90 and parse_window("1h30m") == 5400
    for bad in ("0", "soon", "-5m"):
        with pytest.raises(InputError, match="--breaker-window"):
            parse_window(bad)


def _node(name: str, drained_at: int | None = None, reason: str = "fabricproof check: gpu.count",
          comment: str | None = None) -> ClusterNode:
    if drained_at is None:
        return ClusterNode(name, "IDLE", None, None, ("gpu",), comment)
    return ClusterNode(name, "IDLE+DRAIN", reason, drained_at, ("gpu",), comment)


NOW = 1_800_000_000


def test_counted_drains_are_fabricproofs_in_the_window_in_drain_order():
    scope = [_node(f"n{i:02d}") for i in range(10)]
    scope[5] = _node("n05", NOW - 10)
    scope[2] = _node("n02", NOW - 10)  # the same second: the name orders them, the same way on every node
    scope[7] = _node("n07", NOW - 4000)  # before the window
    scope[8] = _node("n08", NOW - 5, reason="bad DIMM")  # a person's
    scope[9] = _node("n09", NOW - 5, reason="fabricproof: driver-fm run 20260101T000000-x")  # a rollout wave's
    scope[1] = _node("n01", NOW - 1, reason="fabricproof: runbook isolate-failing-nodes run 20260101T000000-y")
    v = judge(scope, Limit("20%", share=20), 3600, NOW)
    assert [n.name for n in v.drains] == ["n02", "n05", "n01"]
    assert (v.allowed, v.open, v.rank("n05"), v.rank("n01"), v.rank("n00")) == (2, True, 1, 2, None)
    assert v.headline() == "breaker open, 3 of 10 drained by fabricproof in the last hour, limit 20% (2 nodes)"
    assert judge(scope, Limit("3", count=3), 1800, NOW).count_words() == \
        "3 of 10 drained by fabricproof in the last 30m, limit 3"


def test_open_is_latched_until_a_reset_and_drains_before_the_reset_stop_counting():
    latched = f"{breaker.MARKER} open {NOW - 100} n04: 2 of 10 drained by fabricproof in the last hour, limit 2"
    scope = [_node("n01", NOW - 50), _node("n02"), _node("n04", comment=latched)]
    v = judge(scope, Limit("2", count=2), 3600, NOW)
    assert len(v.drains) == 1 and v.open and v.opened == (NOW - 100, latched.split(" ", 4)[4])
    assert v.headline().startswith("breaker open since ") and "(n04: 2 of 10" in v.headline()
    # A reset after the latch closes it, and the drain made before it is no longer counted.
    reset = f"{breaker.MARKER} reset {NOW - 20} by ops"
    scope = [_node("n01", NOW - 50, comment=reset), _node("n02", comment=reset), _node("n04", comment=latched)]
    v = judge(scope, Limit("2", count=2), 3600, NOW)
    assert (v.open, v.drains, v.reset_at) == (False, (), NOW - 20)
    assert v.lines()[-1].startswith("  last reset ")


def test_a_node_judges_the_nodes_of_its_own_partitions():
    nodes = parse_nodes(SHOW + "NodeName=n04 State=IDLE Partitions=gpu  ExtSensorsTemp=n/s\n")
    assert [n.name for n in breaker.scope_of(nodes, "n02")] == ["n01", "n02", "n03"]
    assert [n.name for n in breaker.scope_of(nodes, "n03")] == ["n01", "n02", "n03", "n04"]
    assert [n.name for n in breaker.in_partitions(nodes, ["gpu"])] == ["n03", "n04"]
    assert len(breaker.in_partitions(nodes, [])) == 4
