"""A regression gate on the fake fleet: the plan's gate probes run on each wave's hosts before the change (after the
drain) and after it; a host whose figure dropped beyond the tolerance below its own pre-change figure fails the
post-gate and the wave rolls back, with both figures and their evidence in the decision log. The real executor,
gates, state and decision log run; collection, playbooks, the clock and the probe seam are fakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricproof.errors import InputError
from fabricproof.probes.figures import Figure
from fabricproof.rollout import decisions, runs
from fabricproof.rollout import state as st

from .fakes import Fleet
from .test_executor import HOSTS, THREE, FakeClock, fake_world, whats, write_plan  # noqa: F401 - fixture

GATE = """\
gates: {checks: [t.version], retry_interval: 5s, timeout: 20s, probes: [nccl_all_reduce],
        regression: {tolerance_pct: {nccl_all_reduce.busbw: 3, "*": 50}}}
"""


def probe_seam(fleet: Fleet, slows: set[str], calls: list):
    """Figures as the change left them: busbw 481 GB/s, halved on `slows` once they run the new version."""

    def factory(reach, probes):
        assert probes == ("nccl_all_reduce",)

        def probe(hosts, evidence_dir: Path, baseline):
            evidence_dir.mkdir(parents=True, exist_ok=True)
            calls.append((tuple(hosts), baseline.name))
            return {h: [Figure(h, "nccl_all_reduce", "", "busbw",
                               240.5 if h in slows and fleet.version[h] == "2.0" else 481.0, "GB/s")]
                    for h in hosts}, {}

        return probe

    return factory


def start(tmp_path, fleet, slows, calls):
    plan = write_plan(tmp_path, THREE).read_text().replace(
        "  gates: {checks: [t.version], retry_interval: 5s, timeout: 20s}\n", "  " + GATE.replace("\n        ", " "))
    (tmp_path / "plan.yml").write_text(plan)
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock(),
                       gates={"probes": probe_seam(fleet, slows, calls)})
    return runs.start(tmp_path / "plan.yml", runs_dir=tmp_path / "runs", seams=seams)


def test_a_pilot_whose_busbw_drops_is_rolled_back_with_both_figures_on_record(tmp_path):
    fleet, calls = Fleet(HOSTS), []
    code, run_id = start(tmp_path, fleet, {"n1"}, calls)
    assert code == 4
    assert fleet.version["n1"] == "1.0" and fleet.rollbacks == {"n1": 1} and fleet.applies == {"n1": 1}
    run_dir = tmp_path / "runs" / run_id
    assert whats(run_dir)[:9] == ["START", "PRE_GATE", "DRAIN", "PRE_PROBES", "APPLY", "APPLY_DONE", "POST_GATE",
                                  "REGRESSION_GATE", "ROLLBACK"]
    assert calls == [(("n1",), "before"), (("n1",), "after")]  # probed drained, before and after the change
    reg = next(d for d in decisions.read(run_dir) if d["what"] == "REGRESSION_GATE")
    assert reg["hosts"] == ["n1"]
    assert "nccl_all_reduce busbw 240.5 GB/s is 50.0% of 481 GB/s before the change (at least 97%)" in reg["why"]
    assert reg["before"]["n1"][0]["value"] == 481.0 and reg["after"]["n1"][0]["value"] == 240.5
    assert reg["evidence"] == ["waves/1-pilot/post-gate/probes", "waves/1-pilot/pre-gate/probes"]
    state = st.RunState.load(run_dir)
    assert state.status == st.ROLLED_BACK and state.hosts["n1"]["state"] == st.HOST_ROLLED_BACK
    assert "regression gate" in state.step("w0.post_gate")["failed"]["n1"]


def test_figures_within_the_tolerance_proceed(tmp_path):
    fleet, calls = Fleet(HOSTS), []
    code, run_id = start(tmp_path, fleet, set(), calls)
    assert code == 0
    assert fleet.version == dict.fromkeys(HOSTS, "2.0")
    assert whats(tmp_path / "runs" / run_id).count("REGRESSION_GATE") == 3
    assert len(calls) == 6


def test_a_regression_gate_needs_probes_and_known_ones(tmp_path):
    from fabricproof.rollout import plan as plan_mod

    path = write_plan(tmp_path, THREE)
    text = path.read_text()
    path.write_text(text.replace("timeout: 20s}", "timeout: 20s, regression: {tolerance_pct: 3}}"))
    with pytest.raises(InputError, match="name the probes in gates.probes"):
        plan_mod.load(path, [])
    path.write_text(text.replace("timeout: 20s}", "timeout: 20s, probes: [nccl_allreduce]}"))
    with pytest.raises(InputError, match="unknown probe 'nccl_allreduce'"):
        plan_mod.load(path, [])


def test_pre_change_figures_come_back_from_the_state_file_as_figures(tmp_path):
    """A resumed post-gate compares against figures read from state.json: they come back typed, and the file holds
    the same rows as the decision log."""
    from fabricproof.rollout.plan import Budget, Wave

    state = st.RunState.create(tmp_path / "run-1", run_id="run-1", plan_name="p", plan_file="/x/plan.yml",
                               inventory="/x/inv.yml", waves=[Wave(0, "pilot", (("n1",),), (("n1",),), False,
                                                                   Budget(), None)],
                               who="me@here", settings={})
    figs = [Figure("n1", "nccl_all_reduce", "", "busbw", 481.0, "GB/s"),
            Figure("n1", "ib_pair_lat", "n2", "t_typical", 1.9, "us", False)]
    state.set_probe_before("n1", figs)
    state.save()
    loaded = st.RunState.load(tmp_path / "run-1")
    assert loaded.probe_before("n1") == figs
    assert loaded.hosts["n1"]["probe_before"][0] == {"probe": "nccl_all_reduce", "target": "", "figure": "busbw",
                                                     "value": 481.0, "unit": "GB/s", "higher_is_better": True}
