"""Step ids are a type: every id a run writes parses to its parts and formats back to the same string (state files
and decision logs written before the type keep reading), and ids order as a run takes its steps."""

from __future__ import annotations

import pytest

from fabricproof.rollout.stepid import StepId

#: Every form a run writes into state.json and decisions.jsonl: a wave's steps, an apply batch, a rollback phase's
#: steps, and the rollback phase itself.
WRITTEN = {
    "w0.pause": StepId(0, "pause"), "w0.pre_gate": StepId(0, "pre_gate"), "w0.pre_verdict": StepId(0, "pre_verdict"),
    "w0.drain": StepId(0, "drain"), "w0.pre_probes": StepId(0, "pre_probes"), "w0.apply.b0": StepId(0, "apply", 0),
    "w2.apply.b11": StepId(2, "apply", 11), "w0.post_gate": StepId(0, "post_gate"), "w0.soak": StepId(0, "soak"),
    "w0.decide": StepId(0, "decide"), "w0.failed_rollback": StepId(0, "failed_rollback"),
    "w0.undrain": StepId(0, "undrain"), "w0.done": StepId(0, "done"), "rb1.w0.drain": StepId(0, "drain", rollback=1),
    "rb2.w1.apply.b0": StepId(1, "apply", 0, rollback=2), "rb1.w0.gate": StepId(0, "gate", rollback=1),
    "rb12": StepId.phase(12),
}


@pytest.mark.parametrize("text", list(WRITTEN))
def test_every_written_id_parses_and_formats_back(text):
    sid = StepId.parse(text)
    assert sid == WRITTEN[text] and str(sid) == text


@pytest.mark.parametrize("text", ["", "w0", "wave0.pre_gate", "w0.Pre_gate", "w0.apply.bx", "rb.w0.gate", "w-1.done",
                                  "w0.apply.b0.extra", "x1"])
def test_what_no_run_writes_is_not_a_step_id(text):
    assert StepId.parse(text) is None


def test_labels_are_the_parts_the_page_shows():
    sid = StepId.parse("rb1.w0.apply.b2")
    assert sid is not None and (sid.rollback_label, sid.wave, sid.kind, sid.batch_label) == ("rb1", 0, "apply", "b2")
    assert StepId(0, "pre_gate").batch_label is None and StepId(0, "pre_gate").rollback_label is None


def test_ids_order_as_a_run_takes_its_steps():
    run = ["w0.pause", "w0.pre_gate", "w0.pre_verdict", "w0.drain", "w0.pre_probes", "w0.apply.b0", "w0.apply.b1",
           "w0.apply.b10", "w0.post_gate", "w0.soak", "w0.decide", "w0.undrain", "w0.done", "w1.pre_gate",
           "rb1.w1.drain", "rb1.w1.apply.b0", "rb1.w1.gate", "rb1.w1.undrain", "rb2.w0.apply.b0"]
    shuffled = sorted(run, key=lambda t: (len(t) * 7919) % 13)  # any order other than the run's
    assert [str(s) for s in sorted(StepId.parse(t) for t in shuffled)] == run
