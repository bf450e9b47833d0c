"""The collective gate's decision, pure (issue 22.7): a wave with proven hosts runs the collective before and after
the change; a drop beyond the tolerance fails the wave and the search names the host to roll back first. The
collectives are the search simulator's modelled fleet (probes.isolation_sim), not Slurm: the gate is not in the
registry yet, so no rollout runs it."""

from __future__ import annotations

import random

from fabricproof.probes import isolation, isolation_sim
from fabricproof.probes.isolation import Outcome, Settings
from fabricproof.rollout.gates import collective as gate

HOSTS = [f"node{i:05d}" for i in range(16)]
WAVE, PROVEN = HOSTS[8:], HOSTS[:8]


def fleet(bad: dict[str, float] | None = None, pairs: dict | None = None) -> isolation_sim.Fleet:
    return isolation_sim.Fleet(list(HOSTS), {h: "leaf000" for h in HOSTS}, bad=bad or {}, pairs=pairs or {},
                               noise=0.005)


def searcher(f: isolation_sim.Fleet) -> gate.Search:
    def search(hosts, threshold):
        return isolation.search(hosts, isolation_sim.Runner(f, random.Random(7)), Settings(threshold=threshold))

    return search


def measure(f: isolation_sim.Fleet, hosts) -> Outcome:
    return f.outcome(hosts, random.Random(1))


def test_the_group_is_the_wave_and_some_proven_hosts():
    assert gate.group(WAVE, PROVEN, 2) == [*WAVE, *PROVEN[:2]]
    assert gate.group(WAVE, [WAVE[0], *PROVEN], 1) == [*WAVE, PROVEN[0]]


def test_a_change_that_slows_one_host_fails_the_wave_and_names_it_first():
    hosts = gate.group(WAVE, PROVEN, 4)
    before = measure(fleet(), hosts)
    after_fleet = fleet(bad={"node00011": 0.6})  # the change degraded one host of the wave
    d = gate.decide(WAVE, hosts, before, measure(after_fleet, hosts), 10, searcher(after_fleet))
    assert not d.passed and d.roll_back_first == ("node00011",) and d.proven_at_fault == ()
    assert "the search names node00011: roll back first" in d.why
    rec = d.to_record()
    assert rec["search"]["hosts"] == ["node00011"] and rec["after"]["figure"] < rec["before"]["figure"] * 0.9


def test_a_drop_within_the_tolerance_passes_without_a_search():
    hosts = gate.group(WAVE, PROVEN, 2)
    before = Outcome(400.0)

    def no_search(hosts, threshold):
        raise AssertionError("no search when the wave passes")

    d = gate.decide(WAVE, hosts, before, Outcome(365.0), 10, no_search)
    assert d.passed and d.roll_back_first == () and "365 GB/s after the change, 400 before" in d.why


def test_a_hang_after_the_change_is_searched_and_a_proven_host_is_never_rolled_back():
    hosts = gate.group(WAVE, PROVEN, 4)
    f = fleet(bad={"node00002": 0.6})  # a proven host went bad meanwhile, not this wave's change
    f.hangs = {"node00014"}
    after = measure(f, hosts)
    d = gate.decide(WAVE, hosts, Outcome(400.0), after, 10, searcher(f))
    assert after.kind == "timeout" and not d.passed
    assert d.roll_back_first == ("node00014",) and d.proven_at_fault == ("node00002",)
    assert "also at fault, not changed by this wave: node00002" in d.why


def test_nothing_named_rolls_the_whole_wave_back_and_a_failed_before_proves_nothing():
    hosts = gate.group(WAVE, PROVEN, 2)
    f = isolation_sim.Fleet(list(HOSTS), {h: "leaf000" for h in HOSTS}, bad={h: 0.5 for h in hosts}, noise=0.0)
    d = gate.decide(WAVE, hosts, Outcome(400.0), measure(f, hosts), 10, searcher(f))
    assert not d.passed and d.roll_back_first == () and "the whole wave rolls back" in d.why
    failed = gate.decide(WAVE, hosts, Outcome.failed("NCCL WARN ...", "error"), Outcome(400.0), 10, searcher(f))
    assert not failed.passed and "failed before the change" in failed.why
