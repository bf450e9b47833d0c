"""The fabric gate on the fake fleet: inside the post-gate the fabric is read and diffed against the cabling plan; a
wave whose host's cables (or its leaf's) are not as planned fails and, under a halt policy, the rollout halts with the
cable named in the decision log. The real executor, gates, state and decision log run; collection, playbooks, the
clock and the fabric seam are fakes (the real seam reads the lab's ibsim fabric: tests/lab/test_fabric_lab.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricproof.errors import InputError
from fabricproof.rollout import decisions, runs
from fabricproof.rollout import state as st
from fabricproof.rollout.gates.fabric import FabricOutcome, verdict

from .fakes import Fleet
from .test_executor import HOSTS, THREE, FakeClock, fake_world, whats, write_plan  # noqa: F401 - fixture

MOVED = "n2 mlx5_0 port 1 is on leaf-r1 port 2; the plan puts it on leaf-r0 port 2"


class Finding:
    """A finding as subnet.diff gives one (the gate reads its check, hosts and sentence)."""

    def __init__(self, check: str, hosts: tuple[str, ...], sentence: str):
        self.check, self.hosts, self.sentence = check, hosts, sentence


def fabric_seam(calls: list, findings: list, error: str = ""):
    def factory(reach, spec):
        assert spec.plan_file.name == "fabric-plan.yaml" and spec.window_s == 2

        def fabric(hosts, evidence_dir: Path) -> FabricOutcome:
            evidence_dir.mkdir(parents=True, exist_ok=True)
            calls.append(tuple(hosts))
            return verdict(hosts, findings, error)

        return fabric

    return factory


def start(tmp_path, fleet, calls, findings, error="", policy="halt"):
    (tmp_path / "fabric-plan.yaml").write_text("kind: FabricPlan\nversion: 1\nname: t\nlinks: []\n")
    plan = write_plan(tmp_path, THREE, policy=policy)
    plan.write_text(plan.read_text().replace("timeout: 20s}", "timeout: 20s, fabric: {plan: fabric-plan.yaml, "
                                                              "window: 2s}}"))
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock(),
                       gates={"fabric": fabric_seam(calls, findings, error)})
    return runs.start(plan, runs_dir=tmp_path / "runs", seams=seams)


def test_a_miswired_host_in_the_second_wave_halts_the_rollout_naming_the_cable(tmp_path):
    fleet, calls = Fleet(HOSTS), []
    code, run_id = start(tmp_path, fleet, calls, [Finding("subnet.cable_placement", ("n2",), MOVED)])
    assert code == 1  # halted by the policy: a check failed, the wave left drained for an operator
    assert calls == [("n1",), ("n2", "n3")]  # the pilot's fabric is clean; the second wave's is not
    run_dir = tmp_path / "runs" / run_id
    gate = [d for d in decisions.read(run_dir) if d["what"] == "FABRIC_GATE"]
    assert [d["wave"] for d in gate] == ["pilot", "early"]
    assert gate[0]["why"] == "1 of 1 host(s) cabled as planned (1 finding(s) in the fabric)"
    assert gate[1]["hosts"] == ["n2"] and MOVED in gate[1]["why"]
    assert gate[1]["evidence"] == ["waves/2-early/post-gate/fabric"]
    state = st.RunState.load(run_dir)
    assert state.status == st.HALTED and state.hosts["n2"]["state"] == st.FAILED
    assert state.hosts["n2"]["reason"] == f"fabric gate: subnet.cable_placement: {MOVED}"
    assert "fabric gate" in state.step("w1.post_gate")["failed"]["n2"]
    assert fleet.version["n4"] == "1.0" and fleet.version["n5"] == "1.0"  # the last wave was never changed


def test_a_clean_fabric_lets_every_wave_through(tmp_path):
    fleet, calls = Fleet(HOSTS), []
    code, run_id = start(tmp_path, fleet, calls, [])
    assert code == 0 and calls == [("n1",), ("n2", "n3"), ("n4", "n5")]
    assert whats(tmp_path / "runs" / run_id).count("FABRIC_GATE") == 3


def test_a_fabric_that_cannot_be_read_fails_every_host_of_the_wave(tmp_path):
    fleet, calls = Fleet(HOSTS), []
    code, run_id = start(tmp_path, fleet, calls, [], error="ibnetdiscover on n1: exit 1: can't open UMAD port",
                         policy="rollback_wave")
    assert code == 4 and calls == [("n1",)]
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert "can't open UMAD port" in state.step("w0.post_gate")["failed"]["n1"]


def test_the_gate_block_names_a_plan_that_exists(tmp_path):
    from fabricproof.rollout import plan as plan_mod

    path = write_plan(tmp_path, THREE)
    path.write_text(path.read_text().replace("timeout: 20s}", "timeout: 20s, fabric: {plan: nowhere.yaml}}"))
    with pytest.raises(InputError) as err:
        plan_mod.load(path, [])
    problem = next(p for p in err.value.problems if "nowhere" in p.message)
    assert problem.message.startswith("cabling plan 'nowhere.yaml' not found")
    assert problem.file == str(path) and problem.line == 11 and problem.pointer == "/spec/gates/fabric/plan"
    path.write_text(path.read_text().replace("fabric: {plan: nowhere.yaml}", "fabric: {window: 5s}"))
    with pytest.raises(InputError, match=r"plan.yml:11: at /spec/gates/fabric 'plan' is required"):
        plan_mod.load(path, [])


def test_the_verdict_fails_the_hosts_a_finding_names_and_those_not_collected():
    leaf = Finding("subnet.cable_present", ("n1", "n2", "n9"), "leaf-r0 port 33 to spine-1 port 1 is missing")
    out = verdict(["n1", "n2", "n3"], [leaf], not_collected={"n3": "unreachable", "n8": "x"})
    assert out.failed == {"n1": f"fabric gate: subnet.cable_present: {leaf.sentence}",
                          "n2": f"fabric gate: subnet.cable_present: {leaf.sentence}",
                          "n3": "fabric gate: not collected: unreachable"}
    assert out.summary == "0 of 3 host(s) cabled as planned (1 finding(s) in the fabric)"
    assert verdict(["n1"], [], "no fabric vantage host").failed == {"n1": "fabric gate: no fabric vantage host"}
