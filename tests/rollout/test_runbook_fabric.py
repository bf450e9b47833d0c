"""A runbook's validate step that also diffs the fabric against a cabling plan and runs probes (the recabling
runbook's proof): an unknown probe is refused when the runbook is read, a missing or bad plan when a run starts,
before its first step (a lab's plan exists once the lab is up), each with file, line and JSON path."""

from __future__ import annotations

import pytest

from fabricproof.errors import InputError
from fabricproof.rollout import runbook as rb_mod

from .fakes import Fleet
from .test_runbook import HOSTS, fake_world, session, write_runbook  # noqa: F401 - fixture

PROVE = """\
- name: Prove the cabling and the pairwise bandwidth
  validate:
    baseline: base.yaml
    checks: [t.version]
    fabric_plan: {plan}
    fabric_window: 2s
    probes: [{probe}]
    timeout: 5m
"""


def test_the_step_reads_its_plan_window_and_probes(tmp_path):
    (tmp_path / "fabric-plan.yaml").write_text("kind: FabricPlan\nversion: 1\nname: t\nlinks: []\n")
    book = rb_mod.load(write_runbook(tmp_path, PROVE.format(plan="fabric-plan.yaml", probe="ib_pair_bw")))
    v = book.steps[0].validate
    assert v.fabric_plan == (tmp_path / "fabric-plan.yaml").resolve() and v.fabric_window_s == 2
    assert v.probes == ("ib_pair_bw",)


def test_an_unknown_probe_is_named_where_it_is_written(tmp_path):
    (tmp_path / "fabric-plan.yaml").write_text("kind: FabricPlan\nversion: 1\nname: t\nlinks: []\n")
    path = write_runbook(tmp_path, PROVE.format(plan="fabric-plan.yaml", probe="ib_pair_bandwidth"))
    with pytest.raises(InputError) as exc:
        rb_mod.load(path)
    (problem,) = exc.value.problems
    assert (problem.pointer, problem.line) == ("/spec/steps/0/validate/probes/0", 13)
    assert problem.message.startswith("unknown probe 'ib_pair_bandwidth'; probes: ")


def test_a_missing_or_bad_plan_stops_the_run_before_its_first_step(tmp_path):
    book = write_runbook(tmp_path, PROVE.format(plan="nowhere.yaml", probe="ib_pair_bw"))
    assert rb_mod.load(book).steps[0].validate.fabric_plan_missing is not None  # lint passes: the lab may be down
    with pytest.raises(InputError) as exc:
        session(tmp_path, book, Fleet(HOSTS), yes=True)
    (problem,) = exc.value.problems
    assert (problem.file, problem.line, problem.pointer) == (str(book), 11, "/spec/steps/0/validate/fabric_plan")
    assert problem.message == "cabling plan 'nowhere.yaml' not found"
    (tmp_path / "bad.yaml").write_text("kind: FabricPlan\nversion: 1\nname: t\nlinks:\n  - {a: x}\n")
    book = write_runbook(tmp_path, PROVE.format(plan="bad.yaml", probe="ib_pair_bw"))
    with pytest.raises(InputError) as exc:
        session(tmp_path, book, Fleet(HOSTS), yes=True)
    assert all(p.file == str(tmp_path / "bad.yaml") for p in exc.value.problems)
    assert not (tmp_path / "runs").exists()
