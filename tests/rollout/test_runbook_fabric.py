"""A runbook's validate step that also diffs the fabric against a cabling plan and runs probes (the recabling
runbook's proof): a missing plan or an unknown probe is refused with file, line and JSON path before anything runs."""

from __future__ import annotations

import pytest

from fabricproof.errors import InputError
from fabricproof.rollout import runbook as rb_mod

from .test_runbook import fake_world, write_runbook  # noqa: F401 - fixture

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


def test_a_missing_plan_and_an_unknown_probe_are_named_where_they_are_written(tmp_path):
    path = write_runbook(tmp_path, PROVE.format(plan="nowhere.yaml", probe="ib_pair_bandwidth"))
    with pytest.raises(InputError) as exc:
        rb_mod.load(path)
    found = {(p.pointer, p.line): p.message for p in exc.value.problems}
    assert found[("/spec/steps/0/validate/fabric_plan", 11)] == "cabling plan 'nowhere.yaml' not found"
    assert found[("/spec/steps/0/validate/probes/0", 13)].startswith("unknown probe 'ib_pair_bandwidth'; probes: ")
