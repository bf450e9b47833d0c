"""The collective gate's decision, pure (issue 22.7): a wave with proven hosts runs the collective before and after
the change; a drop beyond the tolerance fails the wave and the search names the host to roll back first. The
collectives are the search simulator's modelled fleet (probes.isolation_sim) or a fake seam, not Slurm (the lab
rollout through real Slurm is in tests/slurm/test_collective.py)."""

from __future__ import annotations

import random

from fabricproof.probes import collective as launch
from fabricproof.probes import isolation, isolation_sim
from fabricproof.probes.isolation import Outcome, Settings
from fabricproof.rollout.gates import collective as gate

from .test_executor import fake_world  # noqa: F401 - fixture: the fake fleet's checks in the catalog

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


def test_a_search_stopped_midway_rolls_the_whole_wave_back_rather_than_ending_the_rollout():
    hosts = gate.group(WAVE, PROVEN, 2)

    def stopped(hosts, threshold):  # as the live seam's runner stops when a host takes a job mid-search
        raise launch.Stopped("node00003 is not idle: Slurm shows it allocated")

    d = gate.decide(WAVE, hosts, Outcome(400.0), Outcome(200.0), 10, stopped)
    assert not d.passed and d.roll_back_first == () and d.verdict is None
    assert d.why.endswith("the search stopped (node00003 is not idle: Slurm shows it allocated): the whole wave "
                          "rolls back")


# -- the gate in a rollout on the fake fleet ---------------------------------------------------------------------

def collective_seam(fleet, slows: set[str], calls: list, busy=None):
    """Each group's busbw as the change left it: 400 GB/s, 200 once a host of `slows` runs the new version.
    `busy(calls)`: the hosts the cluster is using now (host -> why), given what was measured so far."""
    from fabricproof.rollout.gates.collective import Seam

    def figure(hosts):
        return Outcome(200.0 if any(h in slows and fleet.version[h] == "2.0" for h in hosts) else 400.0)

    def factory(reach, spec):
        assert spec.scale == "all"

        def measure(hosts, evidence, baseline):
            evidence.mkdir(parents=True, exist_ok=True)
            calls.append(("measure", tuple(hosts), baseline.name))
            return figure(hosts)

        def search(hosts, floor, evidence, baseline):
            calls.append(("search", tuple(hosts), floor))
            return isolation.search(hosts, lambda groups: [figure(g) for g in groups], Settings(threshold=floor))

        def in_use(hosts, evidence, baseline):
            calls.append(("busy", tuple(hosts)))
            return {h: why for h, why in busy(calls).items() if h in hosts}

        return Seam(measure, search, in_use if busy else None)

    return factory


def start(tmp_path, slows, busy=None, waves=None):
    from fabricproof.rollout import runs

    from .fakes import Fleet
    from .test_executor import HOSTS, THREE, FakeClock, write_plan

    fleet, calls = Fleet(HOSTS), []
    plan = write_plan(tmp_path, waves or THREE).read_text().replace(
        "  gates: {checks: [t.version], retry_interval: 5s, timeout: 20s}\n",
        "  gates: {checks: [t.version], retry_interval: 5s, timeout: 20s, collective: {tolerance_pct: 10, "
        "proven_hosts: 3}}\n")
    assert "collective:" in plan
    (tmp_path / "plan.yml").write_text(plan)
    for name in ("before.yaml", "after.yaml"):  # the plan drains in Slurm: srun would never get a drained node
        path = tmp_path / name
        path.write_text(path.read_text() + "    perf: {probes: {collective: {launcher: mpirun}}}\n")
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock(),
                       gates={"collective": collective_seam(fleet, slows, calls, busy)})
    code, run_id = runs.start(tmp_path / "plan.yml", runs_dir=tmp_path / "runs", seams=seams)
    return fleet, calls, code, tmp_path / "runs" / run_id


def test_a_wave_whose_change_slows_one_host_rolls_back_and_the_search_names_it(tmp_path):
    from fabricproof.rollout import decisions

    fleet, calls, code, run_dir = start(tmp_path, {"n5"})
    assert code == 4  # rolled back
    # the pilot (one host, none proven yet) has no group; later waves run with up to 3 hosts proven before them
    measured = [c for c in calls if c[0] == "measure"]
    assert measured == [("measure", ("n2", "n3", "n1"), "before"), ("measure", ("n2", "n3", "n1"), "after"),
                        ("measure", ("n4", "n5", "n1", "n2", "n3"), "before"),
                        ("measure", ("n4", "n5", "n1", "n2", "n3"), "after")]
    gate_rec = [d for d in decisions.read(run_dir) if d["what"] == "COLLECTIVE_GATE"][-1]
    assert gate_rec["hosts"] == ["n5"] and gate_rec["roll_back_first"] == ["n5"]
    assert gate_rec["before"]["figure"] == 400.0 and gate_rec["after"]["figure"] == 200.0
    assert "the search names n5: roll back first" in gate_rec["why"] and gate_rec["search"]["hosts"] == ["n5"]
    assert fleet.rollbacks.get("n5") == 1 and fleet.version["n1"] == "2.0"  # earlier waves keep the change


def test_a_change_that_keeps_the_figure_proceeds_through_every_wave(tmp_path):
    from fabricproof.rollout import decisions

    fleet, calls, code, run_dir = start(tmp_path, set())
    assert code == 0 and fleet.version == dict.fromkeys(fleet.hosts, "2.0")
    whats = [d["what"] for d in decisions.read(run_dir)]
    assert whats.count("PRE_COLLECTIVE") == 2 and whats.count("COLLECTIVE_GATE") == 2
    assert not [c for c in calls if c[0] == "search"]


def test_the_plan_block_is_checked_by_the_schema(tmp_path):
    import pytest as _pytest
    from fabricproof.errors import InputError
    from fabricproof.rollout import plan as plan_mod

    from .test_executor import THREE, write_plan

    path = write_plan(tmp_path, THREE)
    path.write_text(path.read_text().replace("timeout: 20s}", "timeout: 20s, collective: {scale: rack, "
                                                                "tolerance_pct: 10}}"))
    with _pytest.raises(InputError, match=r"plan\.yml:\d+.*collective"):
        plan_mod.load(path, [])


ALLOCATED = "Slurm shows it allocated"


def test_proven_hosts_running_jobs_are_passed_over_and_named_before_and_after_the_change(tmp_path):
    """The decision of issue 22.7: proven hosts are back in service, and a collective never starts on a node running
    a job. n1 runs one from the start: every wave's collective goes without it and the log names it; n2 takes one
    while the last wave changes: the collective after the change goes without it too."""
    from fabricproof.rollout import decisions

    def busy(calls):
        late = ("measure", ("n4", "n5", "n2", "n3"), "before") in calls
        return {"n1": ALLOCATED, **({"n2": ALLOCATED} if late else {})}

    fleet, calls, code, run_dir = start(tmp_path, set(), busy)
    assert code == 0 and fleet.version == dict.fromkeys(fleet.hosts, "2.0")
    measured = [c[1:] for c in calls if c[0] == "measure"]
    assert measured == [(("n2", "n3"), "before"), (("n2", "n3"), "after"),
                        (("n4", "n5", "n2", "n3"), "before"), (("n4", "n5", "n3"), "after")]
    log = decisions.read(run_dir)
    pre = [d for d in log if d["what"] == "PRE_COLLECTIVE"]
    assert [d["passed_over"] for d in pre] == [{"n1": ALLOCATED}] * 2
    assert pre[0]["why"].endswith(f"; proven hosts running jobs, passed over: n1: {ALLOCATED}")
    post = [d for d in log if d["what"] == "COLLECTIVE_GATE"]
    assert [d["passed_over"] for d in post] == [{}, {"n2": ALLOCATED}] and post[1]["group"] == ["n4", "n5", "n3"]
    assert all(d["passed"] for d in post)


def test_too_few_idle_hosts_for_a_collective_fails_closed_before_the_change(tmp_path):
    """A wave of one host whose proven hosts all run jobs has no collective to prove it by: its host is left out
    of the change and fails the wave, named with the hosts passed over; nothing is launched, the rest never runs."""
    from fabricproof.rollout import decisions

    waves = "waves:\n  - {name: pilot, size: 2}\n  - {name: one, size: 1}\n  - {name: rest, size: rest}\n"
    fleet, calls, code, run_dir = start(tmp_path, set(), lambda calls: {"n1": ALLOCATED, "n2": "Slurm shows it mixed"},
                                        waves)
    assert code == 4 and fleet.version["n3"] == "1.0" and fleet.version["n4"] == "1.0"  # n3 never changed
    assert [c for c in calls if c[0] == "measure" and "n3" in c[1]] == []
    log = decisions.read(run_dir)
    pre = [d for d in log if d["what"] == "PRE_COLLECTIVE"][-1]
    assert pre["hosts"] == ["n3"] and pre["figure"] is None and pre["group"] == ["n3"]
    assert pre["failure"] == ("too few idle hosts for a collective: 1 (proven hosts running jobs, passed over: n1: "
                              f"{ALLOCATED}; n2: Slurm shows it mixed)")
    assert [(d["what"], d["hosts"]) for d in log if d["what"] in ("APPLY", "ROLLBACK") and d["wave"] == "one"] == [
        ("ROLLBACK", ["n3"])]


def test_too_few_idle_hosts_after_the_change_fails_the_wave(tmp_path):
    """Both proven hosts take jobs while a wave of one host changes: no collective can prove it after the change,
    so the wave fails and its host is rolled back (the gate never launches on a node running a job)."""
    from fabricproof.rollout import decisions

    def busy(calls):
        late = ("measure", ("n3", "n1", "n2"), "before") in calls
        return {"n1": ALLOCATED, "n2": ALLOCATED} if late else {}

    waves = "waves:\n  - {name: pilot, size: 2}\n  - {name: one, size: 1}\n  - {name: rest, size: rest}\n"
    fleet, calls, code, run_dir = start(tmp_path, set(), busy, waves)
    assert code == 4 and fleet.rollbacks.get("n3") == 1 and fleet.version["n4"] == "1.0"
    assert [c for c in calls if c[0] == "measure" and c[2] == "after" and "n3" in c[1]] == []
    gate_rec = [d for d in decisions.read(run_dir) if d["what"] == "COLLECTIVE_GATE"][-1]
    assert not gate_rec["passed"] and gate_rec["hosts"] == ["n3"] and gate_rec["group"] == ["n3"]
    assert gate_rec["passed_over"] == {"n1": ALLOCATED, "n2": ALLOCATED}
    assert gate_rec["why"].startswith("the collective after the change could not run (too few idle hosts")
