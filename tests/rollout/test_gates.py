"""The gate registry: each gate kind parses its plan block, names its steps and how they read, and takes part in a
wave at the stages it declares; a kind added to the registry alone runs in every wave and shows in the status and
on the page (the fake fleet: the real executor, state, decision log, view and page)."""

from __future__ import annotations

import json

from fabricproof import schemagen
from fabricproof.paths import schemas_dir
from fabricproof.reporters import rollout_html
from fabricproof.rollout import plan as plan_mod
from fabricproof.rollout import decisions, runs, stepid, view
from fabricproof.rollout import state as st
from fabricproof.rollout.gates import GATES, step_form
from fabricproof.rollout.gates.base import ATTEMPTS, SETTINGS_SCHEMA, SETTLE, GateKind, StepForm
from fabricproof.rollout.stepid import StepId

from .fakes import Fleet
from .test_executor import HOSTS, THREE, FakeClock, fake_world, whats, write_plan  # noqa: F401 - fixture
from .test_regression_gate import GATE as REGRESSION_GATE


def test_the_registry_names_each_kind_once_and_each_step_kind_once():
    # The kinds of today keep their order (a wave runs them in it); a new kind takes its place without editing this.
    known = ["checks", "probes", "regression", "fabric", "soak", "collective"]
    assert [name for name in GATES if name in known] == known
    assert all(kind.name == name for name, kind in GATES.items())
    kinds = [k for g in GATES.values() for k in g.steps]
    assert len(kinds) == len(set(kinds))
    own = {stepid.PAUSE, stepid.PRE_VERDICT, stepid.DRAIN, stepid.APPLY, stepid.DECIDE, stepid.FAILED_ROLLBACK,
           stepid.UNDRAIN, stepid.DONE}
    assert not own & set(kinds), "a gate's step kind must not be one of the run's own"
    for g in GATES.values():  # the steps a kind runs as are among those it names
        assert {s for s in (g.before_step, g.after_step) if s} <= set(g.steps)


def test_a_plan_holds_the_settings_of_the_kinds_it_uses_in_registry_order(tmp_path, fake_world):
    plain = plan_mod.load(write_plan(tmp_path, THREE))
    assert list(plain.gates.kinds) == ["checks", "soak"] and plain.gates.checks == ("t.version",)
    assert plain.soak is plain.gates.kinds["soak"] and plain.gates.joining() == []
    text = write_plan(tmp_path, THREE).read_text().replace(
        "  gates: {checks: [t.version], retry_interval: 5s, timeout: 20s}\n",
        "  " + REGRESSION_GATE.replace("\n        ", " "))
    (tmp_path / "plan.yml").write_text(text)
    probed = plan_mod.load(tmp_path / "plan.yml")
    assert list(probed.gates.kinds) == ["checks", "probes", "regression", "soak"]
    assert probed.gates.kinds["probes"] == ("nccl_all_reduce",)
    assert probed.gates.kinds["regression"] == {"nccl_all_reduce.busbw": 3, "*": 50}
    assert [k.name for k, _ in probed.gates.joining()] == ["probes"]


def test_gate_steps_read_as_their_kind_names_them():
    assert view.step_words("pre_gate") == "pre-gate" and view.step_words("post_gate") == "post-gate"
    assert view.step_words("gate") == "rollback gate" and view.step_words("soak") == "soak"
    assert view.step_words("apply", "b1") == "apply (batch 2)"  # the run's own steps read as the page has them
    assert step_form("soak") == StepForm("soak", "samples") and step_form("apply") is None


class Witness(GateKind):
    """A gate kind of this test: after the soak, it records which of the wave's passed hosts it saw."""

    name = "witness"
    schema = {"witness": {"type": "boolean", "description": "Record who passed."}}
    steps = {"witness": StepForm("witness gate", ATTEMPTS)}
    after_stage, after_step = SETTLE, "witness"

    def __init__(self):
        self.reached: list[tuple[str, int]] = []

    def parse(self, block, problems):
        return "seen"

    def live(self, reach, spec):
        """Its own way to the hosts, made once a run from the run's reach: no other file names it."""
        self.reached.append((reach.via, reach.forks))
        return lambda hosts: f"{len(hosts)} of {len(reach.inventory.hosts)} host(s)"

    def after(self, run, w, spec):
        sid = StepId(w.index, "witness")
        hosts = run.state.hosts_in(st.PASSED, wave=w.index)
        run.state.begin(sid, hosts=hosts)
        run.log.record("WITNESS", f"{spec}: {run.ctx.seam(self.name)(hosts)}", step=sid, wave=w.name, hosts=hosts)
        run.state.finish(sid, failed={})


def test_a_kind_added_to_the_registry_runs_in_every_wave_and_shows_in_status_and_page(tmp_path, fake_world,
                                                                                        monkeypatch):
    witness = Witness()
    monkeypatch.setitem(GATES, "witness", witness)
    fleet = Fleet(HOSTS)
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock())
    code, run_id = runs.start(write_plan(tmp_path, THREE), runs_dir=tmp_path / "runs", seams=seams)
    assert code == 0
    run_dir = tmp_path / "runs" / run_id
    assert whats(run_dir)[:10] == ["START", "PRE_GATE", "DRAIN", "APPLY", "APPLY_DONE", "POST_GATE", "SOAK",
                                   "WITNESS", "PROCEED", "UNDRAIN"]
    assert whats(run_dir).count("WITNESS") == 3
    assert witness.reached == [("ssh", runs.DEFAULT_FORKS)]  # its live part, made once for the run
    seen = [e["why"] for e in decisions.read(run_dir) if e["what"] == "WITNESS"]
    assert all(why.startswith("seen: ") and why.endswith(f" of {len(HOSTS)} host(s)") for why in seen), seen
    state = st.RunState.load(run_dir)
    assert all(state.step_done(StepId(i, "witness")) for i in range(3))
    doc = view.build(run_dir)
    witnessed = [s for s in doc["steps"] if s["kind"] == "witness"]
    assert [s["words"] for s in witnessed] == ["witness gate"] * 3 and all("proofs" in s for s in witnessed)
    page = rollout_html.render(doc)
    gates = page[page.index('<section id="gates">'):page.index('<section id="soak">')]
    assert gates.count('<article class="gate" data-step="w') == 9  # pre-gate, post-gate and witness of 3 waves
    assert 'data-step="w2.witness"' in gates and "witness gate" in gates
    assert json.loads(json.dumps(doc)) == doc  # the view stays plain data


def test_each_kind_writes_its_plan_block_into_the_rollout_schema(monkeypatch):
    committed = json.loads((schemas_dir() / "rollout.schema.json").read_text())
    gates = committed["$defs"]["gates"]["properties"]
    for kind in GATES.values():
        assert all(gates[key] == block for key, block in kind.schema.items()), kind.name
        if kind.spec_schema is not None:
            assert {k: v for k, v in committed["$defs"][kind.name].items() if k != "$comment"} == kind.spec_schema
    # Each key is a kind's block or a setting every gate shares, and nothing else.
    assert set(gates) == {key for kind in GATES.values() for key in kind.schema} | set(SETTINGS_SCHEMA)
    assert {"checks", "probes", "regression", "fabric", "collective", "fail_on", "timeout"} <= set(gates)
    monkeypatch.setitem(GATES, "witness", Witness())
    generated = json.loads(schemagen.generate()["rollout.schema.json"])
    assert generated["$defs"]["gates"]["properties"]["witness"] == Witness.schema["witness"]
    assert "witness" not in gates  # the committed schema refuses it until it is regenerated
