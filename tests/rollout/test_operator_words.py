"""What a rollout shows its operator (issue 24.6): progress lines carry their time, and the run's own step ids
(w0.pre_verdict, w0.apply.b0) stay inside state.json."""

from __future__ import annotations

import re

from fabricproof.commands import _runlog
from fabricproof.reporters.rollout_html import step_words
from fabricproof.rollout import runs

from .fakes import Fleet
from .test_cli import _fake_run, cli
# fake_world (autouse there, and so here): the inventory and catalog without subprocesses
from .test_executor import HOSTS, THREE, FakeClock, fake_world, seams, write_plan  # noqa: F401

INTERNAL = re.compile(r"\bpre_verdict\b|\bpre_gate\b|\bpost_gate\b|\.b\d\b|\bw\d\.")


def test_progress_lines_of_a_rollout_start_with_their_utc_time(tmp_path, monkeypatch, capsys):
    runs_dir, run_id, fleet = _fake_run(tmp_path, monkeypatch)
    capsys.readouterr()
    fleet.breaks.clear()
    runs.resume(runs_dir, run_id, progress=_runlog.progress, seams=runs.Seams(
        collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock()))
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) >= 5
    assert all(re.match(r"^\d\d:\d\d:\d\dZ  ", ln) for ln in lines), lines


def test_rollout_status_names_steps_in_words(tmp_path, monkeypatch):
    runs_dir, run_id, _ = _fake_run(tmp_path, monkeypatch)
    table = cli("rollout", "status", run_id, "--runs-dir", runs_dir).output
    waves = table[table.index("waves"):table.index("hosts", table.index("steps done"))]
    assert "apply (batch 1)" in waves and "pre-gate" in waves and "post-gate" in waves
    assert not INTERNAL.search(waves), waves


def test_step_words():
    assert step_words("apply", "b1") == "apply (batch 2)" and step_words("pre_verdict") == "pre-gate verdict"
    assert step_words("failed_rollback") == "rollback of failed" and step_words("new_kind") == "new kind"


def test_a_failed_apply_says_the_playbooks_error_in_the_progress(tmp_path):
    said: list[str] = []
    fleet = Fleet(HOSTS, apply_fails={"n1"})
    runs.start(write_plan(tmp_path, THREE), runs_dir=tmp_path / "runs", seams=seams(fleet), progress=said.append)
    assert ("  apply failed on 1 of 1 host(s): n1: Start Fabric Manager: Job for nvidia-fabricmanager.service "
            "failed") in said, said


def test_a_failed_command_task_reads_as_what_the_command_said():
    from fabricproof.rollout.playbook import _message

    event = {"task": "Start Fabric Manager", "res": {
        "msg": "non-zero return code", "rc": 1, "stdout": "",
        "stderr": "Job for nvidia-fabricmanager.service failed because the control process exited with error code.\n"
                  "See \"systemctl status nvidia-fabricmanager.service\" for details."}}
    assert _message(event) == ("Start Fabric Manager: Job for nvidia-fabricmanager.service failed because the control "
                               "process exited with error code. See \"systemctl status nvidia-fabricmanager.service\" "
                               "for details. (rc 1)")
    assert _message({"task": "t", "res": {"msg": "Destination /x not writable"}}) == "t: Destination /x not writable"
    assert _message({"task": "t", "res": {"msg": "non-zero return code", "rc": 2}}) == "t: non-zero return code"


def test_a_gate_failure_names_the_failing_items_not_their_pointers_and_raw_values():
    """Issue 24.1: rollout status and the decision log read a gate's failures as the report's tables do ("GPU 1: 16
    of 18 links active"), never as pointers and raw arrays; a failure whose items have no name keeps its reason."""
    from fabricproof.model import Finding, Outcome, Report, Result, Severity
    from fabricproof.rollout.gate import host_failures

    speeds = [53.125] * 17 + [0.0]
    links = Result("nvlink.links_active", "links", "n1", Outcome.FAIL, Severity.CRITICAL, "18 links per GPU",
                   actual=[18, 16], reason=f"/nvlink/status/gpus/1/links_active = 16; speeds {speeds}",
                   findings=(Finding("/nvlink/status/gpus/1/links_active", 16, "GPU 1", "16 of 18 links active"),))
    grew = Result("ib.symbol_errors", "errors", "n2", Outcome.FAIL, Severity.CRITICAL, "flat", actual=5,
                  reason="grew: /errors/count +5", findings=(Finding("/errors/count", 5, "", "/errors/count grew by 5"),))
    failed = host_failures(Report(results=(links, grew), hosts=("n1", "n2")))
    assert failed == {"n1": ["nvlink.links_active: GPU 1: 16 of 18 links active"],
                      "n2": ["ib.symbol_errors: grew: /errors/count +5"]}
