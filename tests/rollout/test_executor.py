"""The executor on a fake fleet: waves, gates and budgets, soak, rollback policies, pause, halt and resume, an
in-process kill mid-apply (no host applied twice), locks between runs, and `rollback RUN` with --limit.
The real evaluate(), gates, soak, state and decision log run; only collection, playbooks and the clock are fakes."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from fabricproof.judging import catalog as catalog_mod
from fabricproof import inventory as inventory_mod
from fabricproof.errors import InputError
from fabricproof.inventory import from_list_json
from fabricproof.rollout import decisions, lock, runs
from fabricproof.rollout import state as st
from fabricproof.rollout.executor import ABORT_FILE

from .fakes import ERRORS_CHECK, VERSION_CHECK, Fleet, Killed

HOSTS = ["n1", "n2", "n3", "n4", "n5"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def fake_world(monkeypatch):
    """Inventory and catalog without subprocesses: the fake checks are the whole catalog."""
    inv = from_list_json({"_meta": {"hostvars": {h: {} for h in HOSTS}}, "gpu": {"hosts": HOSTS}}, "inv.yml")
    monkeypatch.setattr(inventory_mod, "load", lambda _path: inv)
    monkeypatch.setattr(catalog_mod, "load", lambda *a, **k: [VERSION_CHECK, ERRORS_CHECK])


def write_plan(tmp_path: Path, waves: str, extra: str = "", policy: str = "rollback_wave") -> Path:
    for name in ("apply.yml", "rollback.yml", "drain.yml", "undrain.yml"):
        (tmp_path / name).write_text("- hosts: all\n  tasks: []\n")
    for name, version in (("before", "1.0"), ("after", "2.0")):
        (tmp_path / f"{name}.yaml").write_text(
            f"apiVersion: fabricproof/v1\nkind: Baseline\nmetadata: {{name: {name}}}\n"
            f"spec:\n  defaults:\n    driver: {{version: '{version}'}}\n")
    body = textwrap.dedent("""\
        apiVersion: fabricproof/v1
        kind: RolloutPlan
        metadata: {name: fake-change}
        spec:
          inventory: inv.yml
          target: gpu
          change:
            apply: {playbook: apply.yml}
            rollback: {playbook: rollback.yml}
          baseline: {before: before.yaml, after: after.yaml}
          gates: {checks: [t.version], retry_interval: 5s, timeout: 20s}
          soak: {duration: 10s, interval: 5s, checks: [t.errors]}
          drain: {scheduler: slurm, drain: drain.yml, undrain: undrain.yml}
        """) + f"  on_failure: {policy}\n" + textwrap.indent(textwrap.dedent(waves), "  ") + \
        textwrap.indent(textwrap.dedent(extra), "  ")
    (tmp_path / "plan.yml").write_text(body)
    return tmp_path / "plan.yml"


THREE = """\
waves:
  - {name: pilot, size: 1}
  - {name: early, size: 2}
  - {name: rest, size: rest}
"""


def start(tmp_path, fleet, plan, clock=None):
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook,
                       clock=clock or FakeClock())
    return runs.start(plan, runs_dir=tmp_path / "runs", seams=seams)


def seams(fleet):
    return runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock())


def whats(run_dir):
    return [d["what"] for d in decisions.read(run_dir)]


def test_three_waves_succeed_drain_apply_undrain_in_order(tmp_path):
    fleet = Fleet(HOSTS)
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE))
    assert code == 0
    assert fleet.version == dict.fromkeys(HOSTS, "2.0") and fleet.applies == dict.fromkeys(HOSTS, 1)
    assert fleet.plays == [("drain.yml", ("n1",)), ("apply.yml", ("n1",)), ("undrain.yml", ("n1",)),
                           ("drain.yml", ("n2", "n3")), ("apply.yml", ("n2", "n3")), ("undrain.yml", ("n2", "n3")),
                           ("drain.yml", ("n4", "n5")), ("apply.yml", ("n4", "n5")), ("undrain.yml", ("n4", "n5"))]
    run_dir = tmp_path / "runs" / run_id
    state = st.RunState.load(run_dir)
    assert state.status == st.DONE and state.data["exit_code"] == 0
    assert state.hosts_in(st.PASSED) == HOSTS
    assert whats(run_dir)[:9] == ["START", "PRE_GATE", "DRAIN", "APPLY", "APPLY_DONE", "POST_GATE", "SOAK",
                                  "PROCEED", "UNDRAIN"]
    assert whats(run_dir)[-1] == "DONE"
    # evidence: per-wave reports in the plan's formats, the inputs the run was judged against
    assert (run_dir / "waves" / "1-pilot" / "post-gate" / "attempt-1" / "report.json").is_file()
    assert (run_dir / "waves" / "3-rest" / "soak" / "sample-2" / "report.json").is_file()
    assert {p.name for p in (run_dir / "inputs").iterdir()} == {"plan.yml", "before.yaml", "after.yaml"}
    proceed = next(d for d in decisions.read(run_dir) if d["what"] == "PROCEED")
    assert proceed["evidence"][0].startswith("waves/1-pilot/post-gate/attempt-1/report.json")


def test_failed_pilot_rolls_back_and_proves_the_before_baseline(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n1"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE))
    assert code == 4
    assert fleet.version["n1"] == "1.0" and fleet.rollbacks == {"n1": 1}
    assert all(fleet.version[h] == "1.0" for h in HOSTS) and fleet.applies == {"n1": 1}  # no other wave started
    run_dir = tmp_path / "runs" / run_id
    assert whats(run_dir) == ["START", "PRE_GATE", "DRAIN", "APPLY", "APPLY_DONE", "POST_GATE", "ROLLBACK",
                              "ROLLBACK_START", "ROLLBACK_APPLY", "ROLLBACK_APPLY_DONE", "ROLLBACK_GATE", "UNDRAIN",
                              "ROLLBACK_DONE"]  # no soak: the post-gate already failed
    rb = next(d for d in decisions.read(run_dir) if d["what"] == "ROLLBACK")
    assert rb["hosts"] == ["n1"] and "1 of 1 host(s) failed, over the budget" in rb["why"]
    # the gate and the decision say what the failed host's checks call for
    post = next(d for d in decisions.read(run_dir) if d["what"] == "POST_GATE")
    assert post["actions"] == rb["actions"] == {"n1": "update_software"}
    assert next(d for d in decisions.read(run_dir) if d["what"] == "ROLLBACK_GATE")["actions"] == {}
    assert "t.version" in st.RunState.load(run_dir).step("w0.post_gate")["failed"]["n1"]
    state = st.RunState.load(run_dir)
    assert state.status == st.ROLLED_BACK and state.hosts["n1"]["state"] == st.HOST_ROLLED_BACK
    assert fleet.drained["n1"] is False  # proven after the rollback: back in service
    # the post-gate retried until its timeout before giving up: 20 s / 5 s -> 5 attempts
    assert state.step("w0.post_gate")["attempts"] == 5


def test_rollback_all_puts_back_every_wave_newest_first(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n4"})
    code, _ = start(tmp_path, fleet, write_plan(tmp_path, THREE, policy="rollback_all"))
    assert code == 4
    rollback_plays = [hosts for name, hosts in fleet.plays if name == "rollback.yml"]
    assert rollback_plays == [("n4", "n5"), ("n2", "n3"), ("n1",)]
    assert fleet.version == dict.fromkeys(HOSTS, "1.0")
    drains = [hosts for name, hosts in fleet.plays if name == "drain.yml"]
    assert drains[-2:] == [("n2", "n3"), ("n1",)]  # earlier waves were back in service: drained again first


def test_halt_policy_stops_and_leaves_the_wave_drained(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n2"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE, policy="halt"))
    assert code == 1
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert state.status == st.HALTED and state.data["halted_wave"] == 1
    assert fleet.drained == {"n1": False, "n2": True, "n3": True} and fleet.rollbacks == {}
    assert whats(tmp_path / "runs" / run_id)[-1] == "HALT"
    # the operator fixes n2 and resumes: the halted wave is proven again and the rollout goes on
    fleet.version["n2"] = "2.0"
    assert runs.resume(tmp_path / "runs", run_id, seams=seams(fleet)) == 0
    assert fleet.version == dict.fromkeys(HOSTS, "2.0") and fleet.applies["n2"] == 1


def test_failures_within_the_budget_proceed_and_the_failed_hosts_roll_back(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n5"})
    waves = """\
        waves:
          - {name: pilot, size: 1}
          - {name: rest, size: rest, max_failed_hosts: 1, max_failed_percent: 25}
        """
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, waves))
    assert code == 0
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert state.hosts["n5"]["state"] == st.HOST_ROLLED_BACK and fleet.version["n5"] == "1.0"
    assert state.hosts_in(st.PASSED) == ["n1", "n2", "n3", "n4"]
    proceed = [d for d in decisions.read(state.dir) if d["what"] == "PROCEED"][-1]
    assert "1 of 4 host(s) failed, within the budget (at most 1 failed host and at most 25% of the wave: 1 tolerated)" \
        in proceed["why"]
    undrained = [hosts for name, hosts in fleet.plays if name == "undrain.yml"]
    assert undrained[-2:] == [("n5",), ("n2", "n3", "n4")]  # n5 back on the old version, proven, in service
    assert not any(fleet.drained.values())


def test_budget_boundary_one_over(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n4", "n5"})
    waves = """\
        waves:
          - {name: pilot, size: 1}
          - {name: rest, size: rest, max_failed_hosts: 2, max_failed_percent: 25}
        """
    code, _ = start(tmp_path, fleet, write_plan(tmp_path, waves))
    assert code == 4  # 2 of 4 = 50% > 25%, although the count limit (2) allows it
    assert fleet.version == {"n1": "2.0", "n2": "1.0", "n3": "1.0", "n4": "1.0", "n5": "1.0"}  # the pilot stays


def test_pre_gate_excludes_unproven_hosts_and_halts_over_budget(tmp_path):
    fleet = Fleet(HOSTS, unreachable={"n1"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE))
    assert code == 1 and fleet.applies == {} and fleet.plays == []  # nothing drained, nothing changed
    halt = decisions.read(tmp_path / "runs" / run_id)[-1]
    assert halt["what"] == "HALT" and "nothing in this wave was changed" in halt["why"] and halt["hosts"] == ["n1"]


def test_soak_growth_fails_the_wave(tmp_path):
    fleet = Fleet(HOSTS, growing={"n1"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE, policy="halt"))
    assert code == 1
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert state.hosts["n1"]["reason"].startswith("soak: t.errors: grew: /errors/count +")
    soak = next(d for d in decisions.read(state.dir) if d["what"] == "SOAK")
    assert soak["hosts"] == ["n1"] and "grew" in soak["why"]
    assert soak["actions"] == {"n1": "drain_and_inspect"}
    halt = next(d for d in decisions.read(state.dir) if d["what"] == "HALT")
    assert halt["actions"] == {"n1": "drain_and_inspect"}
    assert state.step("w0.soak")["evidence"][0].endswith("sample-1/report.json")  # stopped at the first growth


def test_pause_waits_for_an_operator_then_resume_goes_on(tmp_path):
    fleet = Fleet(HOSTS)
    waves = """\
        waves:
          - {name: pilot, size: 1}
          - {name: rest, size: rest, pause: true}
        """
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, waves))
    assert code == 5 and fleet.applies == {"n1": 1}
    assert st.RunState.load(tmp_path / "runs" / run_id).status == st.PAUSED
    # a paused run still holds its hosts
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(lock.LockBusy, match="stopped unfinished \\(paused\\)"):
        runs.start(write_plan(other, THREE), runs_dir=tmp_path / "runs", seams=seams(Fleet(HOSTS)))
    assert runs.resume(tmp_path / "runs", run_id, seams=seams(fleet)) == 0
    assert fleet.applies == dict.fromkeys(HOSTS, 1)
    resume = next(d for d in decisions.read(tmp_path / "runs" / run_id) if d["what"] == "RESUME")
    assert "approved the next wave" in resume["why"]


def test_kill_mid_apply_then_resume_never_applies_a_host_twice(tmp_path):
    fleet = Fleet(HOSTS)
    plan = write_plan(tmp_path, THREE)
    # wave 1 goes through; the apply of wave 2 (n2, n3) dies after changing n2, before n3
    original = fleet.run_playbook

    def arm(path, **kw):
        if Path(path).name == "apply.yml" and kw["hosts"] == ["n2", "n3"] and not getattr(arm, "fired", False):
            arm.fired = True
            fleet.kill_after = ("apply.yml", 1)
        return original(path, **kw)

    with pytest.raises(Killed):
        runs.start(plan, runs_dir=tmp_path / "runs",
                   seams=runs.Seams(collect_factory=fleet.collect_factory, run_playbook=arm, clock=FakeClock()))
    run_id = st.list_runs(tmp_path / "runs")[-1].run_id
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert state.status == st.RUNNING and state.in_doubt("apply") == ["n2", "n3"]
    assert fleet.applies == {"n1": 1, "n2": 1}
    # another run cannot take these hosts while this one is unfinished
    with pytest.raises(lock.LockBusy, match=f"run {run_id} stopped unfinished \\(running\\)"):
        start(tmp_path, Fleet(HOSTS), plan)
    assert runs.resume(tmp_path / "runs", run_id, seams=seams(fleet)) == 0
    assert fleet.applies == dict.fromkeys(HOSTS, 1)  # n2 was proven and left alone; n3 applied once
    applies = [hosts for name, hosts in fleet.plays if name == "apply.yml"]
    assert applies == [("n1",), ("n2", "n3"), ("n3",), ("n4", "n5")]
    log = decisions.read(tmp_path / "runs" / run_id)
    recovered = next(d for d in log if d["what"] == "APPLY_RECOVERED")
    retried = next(d for d in log if d["what"] == "APPLY_RETRY")
    assert recovered["hosts"] == ["n2"] and retried["hosts"] == ["n3"]


def test_abort_stops_a_stopped_run_and_rollback_cleans_up(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n2"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE, policy="halt"))
    assert code == 1
    msg = runs.abort(tmp_path / "runs", run_id, "incident 42")
    assert "marked aborted" in msg
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert state.status == st.ABORTED and (state.dir / ABORT_FILE).is_file()
    with pytest.raises(Exception, match="was aborted"):
        runs.resume(tmp_path / "runs", run_id, seams=seams(fleet))
    code, state = runs.rollback(tmp_path / "runs", run_id, limit="n2", seams=seams(fleet))
    assert code == 4 and fleet.version == {"n1": "2.0", "n2": "1.0", "n3": "2.0", "n4": "1.0", "n5": "1.0"}
    assert state.hosts["n2"]["state"] == st.HOST_ROLLED_BACK and state.hosts["n1"]["state"] == st.PASSED
    code, state = runs.rollback(tmp_path / "runs", run_id, seams=seams(fleet))
    assert code == 4 and fleet.version == dict.fromkeys(HOSTS, "1.0")
    assert [hosts for name, hosts in fleet.plays if name == "rollback.yml"][-2:] == [("n3",), ("n1",)]


def test_a_rollback_with_a_limit_reads_the_inventory_once(tmp_path, monkeypatch):
    """Each read is an `ansible-inventory` process (0.7 CPU-s) on a cache miss: the limit uses the one the run's
    reopening read."""
    fleet = Fleet(HOSTS, breaks={"n2"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE, policy="halt"))
    read = inventory_mod.load
    paths: list[str] = []
    monkeypatch.setattr(inventory_mod, "load", lambda path: paths.append(path) or read(path))
    code, state = runs.rollback(tmp_path / "runs", run_id, limit="n2", seams=seams(fleet))
    assert code == 4 and state.hosts["n2"]["state"] == st.HOST_ROLLED_BACK and len(paths) == 1


def test_a_rollback_that_does_not_prove_waits_for_an_operator(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n1"}, rollback_breaks={"n1"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE))
    assert code == 5
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert state.status == st.ROLLBACK_FAILED and state.hosts["n1"]["state"] == st.HOST_ROLLBACK_FAILED
    assert fleet.drained["n1"] is True  # not proven: stays out of service
    assert whats(state.dir)[-1] == "ROLLBACK_FAILED"


def test_apply_failure_is_a_failed_host_with_the_task_message(tmp_path):
    fleet = Fleet(HOSTS, apply_fails={"n1"})
    code, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE))
    assert code == 4
    state = st.RunState.load(tmp_path / "runs" / run_id)
    assert state.hosts["n1"]["state"] == st.HOST_ROLLED_BACK
    done = next(d for d in decisions.read(state.dir) if d["what"] == "APPLY_DONE")
    assert "n1: Start Fabric Manager: Job for nvidia-fabricmanager.service failed" in done["why"]


def test_plan_changed_since_the_run_started_is_refused_on_resume(tmp_path):
    fleet = Fleet(HOSTS, breaks={"n2"})
    plan = write_plan(tmp_path, THREE, policy="halt")
    _, run_id = start(tmp_path, fleet, plan)
    plan.write_text(plan.read_text().replace("timeout: 20s", "timeout: 30s"))
    with pytest.raises(Exception, match="the plan changed since run"):
        runs.resume(tmp_path / "runs", run_id, seams=seams(fleet))


def test_state_json_is_a_faithful_record(tmp_path):
    fleet = Fleet(HOSTS)
    _, run_id = start(tmp_path, fleet, write_plan(tmp_path, THREE))
    data = json.loads((tmp_path / "runs" / run_id / "state.json").read_text())
    assert data["kind"] == "RolloutState" and data["plan"] == "fake-change" and data["status"] == "done"
    assert [w["hosts"] for w in data["waves"]] == [["n1"], ["n2", "n3"], ["n4", "n5"]]
    assert all(data["hosts"][h]["apply"]["ok"] for h in HOSTS)
    assert all(v["status"] == "done" for v in data["steps"].values())


def test_host_reservations_hold_across_runs_directories(tmp_path):
    """The lock directory is machine-wide (FABRICPROOF_STATE_DIR): a run started from another --runs-dir is refused
    while a paused run elsewhere holds the hosts, with that run and its directory named; once the paused run is
    aborted its hosts are free, and a run that finishes leaves no reservation behind."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    paused = """\
        waves:
          - {name: pilot, size: 1}
          - {name: rest, size: rest, pause: true}
        """
    code, run_id = runs.start(write_plan(first, paused), runs_dir=first / "runs", seams=seams(Fleet(HOSTS)))
    assert code == 5
    with pytest.raises(lock.LockBusy) as refused:
        runs.start(write_plan(second, THREE), runs_dir=second / "runs", seams=seams(Fleet(HOSTS)))
    problem = refused.value.problems[0]
    assert f"run {run_id} stopped unfinished (paused) and still holds n1, n2, n3, n4, n5" in problem.message
    assert problem.file == str((first / "runs" / run_id).resolve())
    assert not (second / "runs").exists() or st.list_runs(second / "runs") == []  # nothing touched
    runs.abort(first / "runs", run_id, "replanned")
    code, _ = runs.start(write_plan(second, THREE), runs_dir=second / "runs", seams=seams(Fleet(HOSTS)))
    assert code == 0
    locks = Path(os.environ["FABRICPROOF_STATE_DIR"]) / "locks"
    assert {p.name: json.loads(p.read_text()) for p in locks.iterdir()} == {f"{h}.lock": {} for h in HOSTS}


def test_a_full_disk_mid_run_stops_it_with_that_error_and_resume_finishes_it(tmp_path, small_disk):
    """The APPLY_DONE record finds the disk full: that is the error raised (not the ERROR record that cannot be
    written after it either), the log stays whole, and once there is room the run resumes without applying twice."""
    from fabricproof.fsutil import NotWritten

    from .conftest import fill, leave_no_room

    runs_dir = small_disk / "runs"
    filled: list = []

    class FillsTheDisk(Fleet):
        def run_playbook(self, path, **kw):
            if Path(path).name == "apply.yml" and not filled:
                run = st.list_runs(runs_dir)[-1]
                leave_no_room(run.dir, run.run_id)
                filled.append(fill(small_disk))
            return super().run_playbook(path, **kw)

    fleet = FillsTheDisk(HOSTS)
    plan = write_plan(tmp_path, "waves:\n  - {name: pilot, size: 1}\n  - {name: rest, size: rest}\n")
    with pytest.raises(NotWritten, match="decision APPLY_DONE not recorded: No space left on device"):
        runs.start(plan, runs_dir=runs_dir, seams=seams(fleet))
    run = st.list_runs(runs_dir)[-1]
    assert whats(run.dir)[-2:] == ["APPLY", "NOTE"] and not decisions.read_log(run.dir).unreadable
    assert run.status == st.RUNNING  # on disk: a run whose process died, which resume takes up
    filled[0].unlink()
    assert runs.resume(runs_dir, run.run_id, seams=seams(fleet)) == 0
    assert fleet.applies == dict.fromkeys(HOSTS, 1)
    assert "APPLY_RECOVERED" in whats(run.dir) and whats(run.dir)[-1] == "DONE"


@pytest.mark.parametrize(("timeout", "host_timeout"), [("20s", 30.0), ("2m", 120.0), ("1h", 300.0)])
def test_gates_bound_each_host_by_the_plans_gate_timeout(tmp_path, timeout, host_timeout):
    """A gate's collection gives one host no longer than the gate's own timeout (never below the shortest collector
    timeout, never above the collection default): a silent host must not hold an attempt past its gate."""
    fleet = Fleet(HOSTS)
    asked: list[tuple] = []

    def factory(*args):
        asked.append(args)
        return fleet.collect

    plan = write_plan(tmp_path, THREE)
    plan.write_text(plan.read_text().replace("timeout: 20s", f"timeout: {timeout}"))
    code, _ = runs.start(plan, runs_dir=tmp_path / "runs",
                         seams=runs.Seams(collect_factory=factory, run_playbook=fleet.run_playbook, clock=FakeClock()))
    assert code == 0 and len(asked) == 1
    assert asked[0][6] == host_timeout  # (inventory, checks, via, run id, inventory path, forks, host timeout)


def test_every_wave_is_checked_before_the_first_is_changed(tmp_path, monkeypatch):
    """Issue 19.8: a wave-3 host whose connection settings --via ssh cannot use stopped the run only when wave 3's
    gate reached it, after waves 1 and 2 were changed. Now run and the dry run both exit 2 first, naming the wave
    and the host; nothing is applied, locked or created."""
    vars_ = {h: {} for h in HOSTS}
    vars_["n5"] = {"ansible_ssh_common_args": "-o ProxyCommand='nc %h %p'"}
    inv = from_list_json({"_meta": {"hostvars": vars_}, "gpu": {"hosts": HOSTS}}, "inv.yml")
    monkeypatch.setattr(inventory_mod, "load", lambda _path: inv)
    fleet = Fleet(HOSTS)
    plan = write_plan(tmp_path, THREE)
    with pytest.raises(InputError) as caught:
        start(tmp_path, fleet, plan)
    assert ("wave 3 (rest), host 'n5': --via ssh cannot use its connection settings: ProxyCommand in "
            "ansible_ssh_common_args is not supported") in str(caught.value)
    assert str(caught.value).endswith("every wave is checked before any is changed: nothing was changed")
    assert fleet.plays == [] and not (tmp_path / "runs").exists()
    with pytest.raises(InputError):
        runs.preflight(runs.prepare(plan, None), "ssh")  # what `rollout plan` runs
    runs.preflight(runs.prepare(plan, None), "ansible")  # Ansible reads its own settings: nothing to refuse here
