"""Runbooks: validation with file:line, and runs on a fake fleet (ask before mutating steps, --yes, '@failed',
a rollback step, decisions, the evidence bundle)."""

from __future__ import annotations

import tarfile
import textwrap
from pathlib import Path

import pytest
from fabricproof.judging import catalog as catalog_mod
from fabricproof import inventory as inventory_mod
from fabricproof.errors import InputError
from fabricproof.inventory import from_list_json
from fabricproof.rollout import decisions, runs
from fabricproof.rollout import runbook as rb_mod
from fabricproof.rollout import state as st

from .fakes import ERRORS_CHECK, VERSION_CHECK, Fleet
from .test_executor import THREE, FakeClock, write_plan

REPO = Path(__file__).resolve().parents[2]
HOSTS = ["n1", "n2", "n3", "n4", "n5"]
INV = from_list_json({"_meta": {"hostvars": {h: {} for h in HOSTS}}, "gpu": {"hosts": HOSTS}}, "inv.yml")


@pytest.fixture(autouse=True)
def fake_world(monkeypatch):
    monkeypatch.setattr(inventory_mod, "load", lambda _path: INV)
    monkeypatch.setattr(catalog_mod, "load", lambda *a, **k: [VERSION_CHECK, ERRORS_CHECK])


def write_runbook(tmp_path: Path, steps: str) -> Path:
    for name in ("drain.yml", "fix.yml"):
        (tmp_path / name).write_text("- hosts: all\n  tasks: []\n")
    (tmp_path / "base.yaml").write_text("apiVersion: fabricproof/v1\nkind: Baseline\nmetadata: {name: base}\n"
                                        "spec:\n  defaults:\n    driver: {version: '1.0'}\n")
    path = tmp_path / "runbook.yml"
    path.write_text("apiVersion: fabricproof/v1\nkind: Runbook\nmetadata: {name: incident}\nspec:\n"
                    "  inventory: inv.yml\n  steps:\n" + textwrap.indent(textwrap.dedent(steps), "    "))
    return path


def session(tmp_path, book, fleet, *, yes=False, answers=(), limit=None):
    asked: list[str] = []
    replies = list(answers)

    def ask(question: str) -> bool:
        asked.append(question)
        return replies.pop(0)

    s = rb_mod.Session(runbook=rb_mod.load(book), inventory_path="inv.yml", inventory=INV, runs_dir=tmp_path / "runs",
                       yes=yes, ask=ask, limit=limit, collect_factory=fleet.collect_factory,
                       run_playbook=fleet.run_playbook, clock=FakeClock())
    return rb_mod.RunbookRun(s), asked


ISOLATE = """\
- name: Find the failing nodes
  validate: {baseline: base.yaml, checks: [t.version]}
  on_failure: continue
- name: Drain them
  playbook: drain.yml
  hosts: "@failed"
"""


def test_validate_then_drain_only_the_failed_hosts(tmp_path):
    fleet = Fleet(HOSTS)
    fleet.version.update(n2="2.0", n4="9.9")
    run, asked = session(tmp_path, write_runbook(tmp_path, ISOLATE), fleet, answers=[True])
    assert run.run() == 1  # a step failed (the validate), the runbook went on as told
    assert fleet.plays == [("drain.yml", ("n2", "n4"))]
    assert asked == ["run drain.yml on 2 host(s): n2, n4?"]
    log = decisions.read(run.dir)
    assert [d["what"] for d in log] == ["RUNBOOK_START", "STEP_FAILED", "CONFIRMED", "STEP_DONE", "RUNBOOK_END"]
    assert "2 of 5 host(s) failed: n2: t.version" in log[1]["why"]
    assert log[2]["who"] and log[2]["why"] == asked[0]
    with tarfile.open(run.dir / "evidence.tar.gz") as tar:
        names = tar.getnames()
    assert f"{run.run_id}/decisions.jsonl" in names and f"{run.run_id}/runbook.json" in names
    assert any(n.endswith("steps/1-find-the-failing-nodes/attempt-1/report.json") for n in names)
    assert any(n.endswith("steps/1-find-the-failing-nodes/attempt-1/report.md") for n in names)


def test_declining_a_mutating_step_stops_with_exit_5(tmp_path):
    fleet = Fleet(HOSTS)
    fleet.version["n1"] = "2.0"
    run, _ = session(tmp_path, write_runbook(tmp_path, ISOLATE), fleet, answers=[False])
    assert run.run() == 5 and fleet.plays == []
    assert [d["what"] for d in decisions.read(run.dir)][-3:] == ["DECLINED", "STEP_DECLINED", "RUNBOOK_END"]


def test_yes_answers_for_the_operator_and_says_so(tmp_path):
    book = write_runbook(tmp_path, """\
        - name: Ready?
          confirm: Are the GPU clients stopped?
        - name: Fix
          playbook: fix.yml
          vars: {flag: 1}
        - name: Settle
          wait: 5s
        """)
    fleet = Fleet(HOSTS)
    run, asked = session(tmp_path, book, fleet, yes=True, limit="n1:n3")
    assert run.run() == 0 and asked == []
    assert fleet.plays == [("fix.yml", ("n1", "n3"))]
    confirmed = [d["why"] for d in decisions.read(run.dir) if d["what"] == "CONFIRMED"]
    assert confirmed == ["Are the GPU clients stopped? (--yes)", "run fix.yml on 2 host(s): n1, n3? (--yes)"]


def test_failed_hosts_step_is_skipped_when_nothing_failed(tmp_path):
    run, asked = session(tmp_path, write_runbook(tmp_path, ISOLATE), Fleet(HOSTS))
    assert run.run() == 0 and asked == []
    assert "no hosts failed the last validate step" in decisions.read(run.dir)[-2]["why"]


def test_rollback_step_rolls_back_the_last_rollout(tmp_path):
    fleet = Fleet(HOSTS)
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock())
    code, run_id = runs.start(write_plan(plan_dir, THREE), runs_dir=tmp_path / "runs", seams=seams)
    assert code == 0 and fleet.version == dict.fromkeys(HOSTS, "2.0")
    with (tmp_path / "runs" / run_id / decisions.DECISIONS_FILE).open("ab") as fh:
        fh.write(b'{"when": "2026-')  # a torn last line: the rollback sets it aside, and the bundle keeps it
    book = write_runbook(tmp_path, """\
        - name: Roll back
          rollback: {run: last}
        - name: Prove
          validate: {baseline: base.yaml}
        """)
    run, asked = session(tmp_path, book, fleet, answers=[True])
    assert run.run() == 0
    assert asked == [f"roll back rollout run {run_id} (fake-change, done)?"]
    assert fleet.version == dict.fromkeys(HOSTS, "1.0")
    assert st.RunState.load(tmp_path / "runs" / run_id).status == st.ROLLED_BACK
    with tarfile.open(run.dir / "evidence.tar.gz") as tar:
        names = tar.getnames()
    assert f"{run.run_id}/rollouts/{run_id}/decisions.jsonl" in names
    assert f"{run.run_id}/rollouts/{run_id}/decisions.jsonl.torn-1" in names


# ----------------------------------------------------------------------------------------------- validation


def test_a_step_with_two_actions_or_none_names_its_line(tmp_path):
    book = write_runbook(tmp_path, """\
        - name: both
          wait: 5s
          confirm: really?
        - name: none
        """)
    with pytest.raises(InputError) as exc:
        rb_mod.load(book)
    probs = exc.value.problems
    assert [(p.line, p.pointer) for p in probs] == [(7, "/spec/steps/0"), (10, "/spec/steps/1")]
    assert "exactly one of playbook, validate, rollback, wait, confirm; it has wait, confirm" in probs[0].message
    assert probs[1].message.endswith("it has none")


def test_missing_files_unknown_checks_and_misplaced_hosts(tmp_path):
    book = write_runbook(tmp_path, """\
        - name: a
          playbook: nosuch.yml
        - name: b
          validate: {baseline: missing.yaml, checks: [t.version, nope.*]}
        - name: c
          wait: 1m
          hosts: n1
        - name: d
          wait: soon
        """)
    with pytest.raises(InputError) as exc:
        rb_mod.load(book)
    msgs = {p.pointer: p.message for p in exc.value.problems}
    assert msgs["/spec/steps/3/wait"]  # schema: not a duration
    with pytest.raises(InputError) as exc:
        rb_mod.load(write_runbook(tmp_path, """\
            - name: a
              playbook: nosuch.yml
            - name: b
              validate: {baseline: missing.yaml, checks: [t.version, nope.*]}
            - name: c
              wait: 1m
              hosts: n1
            """))
    msgs = {p.pointer: p.message for p in exc.value.problems}
    assert "playbook 'nosuch.yml' not found" in msgs["/spec/steps/0/playbook"]
    assert "baseline 'missing.yaml' not found" in msgs["/spec/steps/1/validate/baseline"]
    assert "'nope.*' matches no check id" in msgs["/spec/steps/1/validate/checks/1"]
    assert "a wait step acts on no hosts" in msgs["/spec/steps/2/hosts"]


def test_shipped_runbooks_are_valid(monkeypatch):
    monkeypatch.undo()  # the real catalog
    for path in sorted((REPO / "inventories" / "lab" / "runbooks").glob("*.yml")):
        book = rb_mod.load(path)
        assert book.steps and book.inventory is not None, path
        for step in book.steps:
            if step.kind == "playbook":
                assert step.playbook.is_file()


def test_a_limit_that_leaves_no_target_host_is_refused_before_anything_is_written(tmp_path):
    book = write_runbook(tmp_path, ISOLATE)
    for limit, says in (("n9", "no host or group named n9"), ("!n*", "matches no host")):
        with pytest.raises(InputError, match=says):
            session(tmp_path, book, Fleet(HOSTS), yes=True, limit=limit)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_log_ends_with_the_exit_the_operator_saw_when_a_step_raises(tmp_path):
    fleet = Fleet(HOSTS)

    def broken_playbook(*_a, **_k):
        raise InputError("the playbook vanished")

    run, _ = session(tmp_path, write_runbook(tmp_path, ISOLATE), fleet, yes=True)
    run.s.run_playbook = broken_playbook
    fleet.version.update(n2="2.0")
    with pytest.raises(InputError):
        run.run()
    end = decisions.read(run.dir)[-1]
    assert end["what"] == "RUNBOOK_END" and end["why"] == "exit 2"


def test_a_misspelt_step_key_is_named_with_a_suggestion(tmp_path):
    with pytest.raises(InputError) as exc:
        rb_mod.load(write_runbook(tmp_path, """\
            - name: Drain them
              playbok: drain.yml
            """))
    msgs = {p.pointer: p.message for p in exc.value.problems}
    assert msgs["/spec/steps/0/playbok"] == "unknown key 'playbok'; did you mean 'playbook'?"


def test_step_keys_are_the_schemas():
    from fabricproof import documents

    assert set(rb_mod.STEP_KEYS) == set(documents.schema("runbook")["$defs"]["step"]["properties"])


def test_a_breaker_goes_on_a_playbook_step_as_a_share_or_a_count(tmp_path):
    book = rb_mod.load(write_runbook(tmp_path, ISOLATE + "  breaker: 10%\n"))
    assert book.steps[1].breaker is not None and book.steps[1].breaker.nodes(64) == 6
    with pytest.raises(InputError) as exc:
        rb_mod.load(write_runbook(tmp_path, """\
            - name: a
              playbook: drain.yml
              breaker: 0
            - name: b
              wait: 1m
              breaker: 10%
            """))
    msgs = {p.pointer: p.message for p in exc.value.problems}
    assert msgs["/spec/steps/0/breaker"].startswith("breaker '0': give a share of the partition (10%) or a count")
    assert msgs["/spec/steps/1/breaker"] == "a wait step drains nothing; remove breaker"
    assert any(p.line == 9 for p in exc.value.problems)  # file and line, for the editor


def test_a_validate_baseline_group_the_inventory_lacks_is_refused_before_the_run_directory(tmp_path):
    book = write_runbook(tmp_path, ISOLATE)
    (tmp_path / "base.yaml").write_text("apiVersion: fabricproof/v1\nkind: Baseline\nmetadata: {name: base}\n"
                                        "spec:\n  defaults: {}\n  groups:\n    gpus:\n      driver: {version: '1.0'}\n")
    with pytest.raises(InputError) as err:
        session(tmp_path, book, Fleet(HOSTS))
    assert str(err.value) == (f"{tmp_path / 'base.yaml'}:7: at /spec/groups/gpus no group 'gpus' in inventory inv.yml; "
                              "did you mean 'gpu'?")
    assert not (tmp_path / "runs").exists()
