"""The rollout, rollback and runbook commands: dry-run output, exit codes for bad input, status, abort, lint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fabricproof.rollout import runs
from fabricproof.rollout import state as st
from typer.testing import CliRunner

from .entry import app
from .fakes import Fleet

REPO = Path(__file__).resolve().parents[2]
PLANS = REPO / "inventories" / "lab" / "plans"


def cli(*args: object):
    return CliRunner().invoke(app(), [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def lab_inventory(tmp_path) -> Path:
    """A YAML inventory shaped like the lab's (read by the real ansible-inventory): every profile's group, the ones
    without a host empty, as the lab baseline names them all."""
    path = tmp_path / "inventory.yml"
    path.write_text("all:\n  children:\n    dgx_a100: {}\n    hgx_h200: {}\n    gb200_nvl72: {}\n"
                    "    dgx_h100:\n      hosts:\n"
                    + "".join(f"        h100-000{i}: {{ansible_host: 127.10.0.{i}}}\n" for i in range(1, 5)))
    return path


def test_plan_shows_waves_gates_and_rollback_and_touches_nothing(tmp_path, lab_inventory, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("rollout", "plan", PLANS / "driver-fm-upgrade.yml", "-i", lab_inventory)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "driver-fm-535.183.01" in out and "1. pilot" in out and "h100-0001" in out and "3. rest" in out
    assert "post-gate retried every 2s for up to 30s" in out and "on failure: rollback_wave" in out
    assert "run rollback.yml on them" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inventory.yml"]  # no runs/, no locks


def test_plan_json(lab_inventory):
    result = cli("rollout", "plan", PLANS / "hca-firmware.yml", "-i", lab_inventory, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [w["hosts"] for w in doc["waves"]] == [["h100-0001"], ["h100-0002", "h100-0003", "h100-0004"]]
    assert [len(b) for b in doc["waves"][1]["batches"]] == [1, 1, 1]
    assert doc["gates"]["checks"][0] == "ib.fw_version" and doc["soak"]["duration_s"] == 2
    assert doc["change"]["rollback_vars"]["hca_fw_version"] == "28.41.1000"


def test_bad_plan_exits_2_naming_file_and_line(tmp_path, lab_inventory):
    bad = tmp_path / "plan.yml"
    bad.write_text((PLANS / "hca-firmware.yml").read_text().replace("on_failure: rollback_wave", "on_failure: pray"))
    result = cli("rollout", "run", bad, "-i", lab_inventory, "--runs-dir", tmp_path / "runs")
    assert result.exit_code == 2
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "on_failure" in text)
    assert f"{bad}:{line}: at /spec/on_failure" in result.output
    assert not (tmp_path / "runs").exists()


def test_a_plan_without_an_inventory_asks_for_one(tmp_path):
    plan = tmp_path / "plan.yml"
    plan.write_text((PLANS / "hca-firmware.yml").read_text().replace("  inventory: /var/lib/fabricproof/lab/"
                                                                     "inventory.yml\n", "")
                    .replace("../baseline.yaml", str(REPO / "inventories/lab/baseline.yaml"))
                    .replace("baselines/", str(PLANS / "baselines") + "/"))
    result = cli("rollout", "plan", plan)
    assert result.exit_code == 2 and "give one with -i INVENTORY" in result.output


def _fake_run(tmp_path: Path, monkeypatch) -> tuple[Path, str, Fleet]:
    from fabricproof.judging import catalog as catalog_mod
    from fabricproof import inventory as inventory_mod
    from fabricproof.inventory import from_list_json

    from .fakes import ERRORS_CHECK, VERSION_CHECK
    from .test_executor import THREE, FakeClock, write_plan

    hosts = ["n1", "n2", "n3", "n4", "n5"]
    inv = from_list_json({"_meta": {"hostvars": {h: {} for h in hosts}}, "gpu": {"hosts": hosts}}, "inv.yml")
    monkeypatch.setattr(inventory_mod, "load", lambda _p: inv)
    monkeypatch.setattr(catalog_mod, "load", lambda *a, **k: [VERSION_CHECK, ERRORS_CHECK])
    fleet = Fleet(hosts, breaks={"n2"})
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock())
    code, run_id = runs.start(write_plan(tmp_path, THREE, policy="halt"), runs_dir=tmp_path / "runs", seams=seams)
    assert code == 1
    return tmp_path / "runs", run_id, fleet


def test_status_lists_runs_and_shows_one(tmp_path, monkeypatch):
    runs_dir, run_id, _ = _fake_run(tmp_path, monkeypatch)
    listing = cli("rollout", "status", "--runs-dir", runs_dir, "--format", "json")
    assert listing.exit_code == 0
    assert [(r["run_id"], r["status"], r["exit_code"]) for r in json.loads(listing.stdout)] == [(run_id, "halted", 1)]
    assert "halted" in cli("rollout", "status", "--runs-dir", runs_dir).output
    detail = cli("rollout", "status", "last", "--runs-dir", runs_dir, "--format", "json")
    doc = json.loads(detail.stdout)
    assert doc["run_id"] == run_id and doc["status"] == "halted" and doc["driven_by"] is None
    assert doc["decisions"][-1]["what"] == "HALT" and doc["hosts"]["n2"]["state"] == "failed"
    table = cli("rollout", "status", run_id, "--runs-dir", runs_dir)
    assert "post-gate: t.version" in table.output and "HALT" in table.output


def test_abort_marks_a_stopped_run_and_refuses_resume(tmp_path, monkeypatch):
    runs_dir, run_id, _ = _fake_run(tmp_path, monkeypatch)
    aborted = cli("rollout", "abort", run_id, "--runs-dir", runs_dir, "--reason", "INC-7")
    assert aborted.exit_code == 0 and "marked aborted" in aborted.output
    assert st.RunState.load(runs_dir / run_id).status == st.ABORTED
    again = cli("rollout", "abort", run_id, "--runs-dir", runs_dir)
    assert again.exit_code == 2 and "already aborted" in again.output
    resumed = cli("rollout", "resume", run_id, "--runs-dir", runs_dir)
    assert resumed.exit_code == 2 and "was aborted" in resumed.output


def test_unknown_run_exits_2(tmp_path):
    result = cli("rollback", "nope", "--runs-dir", tmp_path)
    assert result.exit_code == 2 and "no rollout run 'nope'" in result.output


def test_runbook_lint(tmp_path):
    result = cli("runbook", "lint", REPO / "inventories" / "lab" / "runbooks" / "restart-fabric-manager.yml")
    assert result.exit_code == 0 and "4 step(s)" in result.output and "(asks first)" in result.output
    bad = tmp_path / "rb.yml"
    bad.write_text("apiVersion: fabricproof/v1\nkind: Runbook\nmetadata: {name: x}\nspec:\n  steps:\n"
                   "    - name: a\n      wait: 1s\n      confirm: Sure\n")
    result = cli("runbook", "lint", bad)
    assert result.exit_code == 2 and f"{bad}:6: at /spec/steps/0 a step needs exactly one of" in result.output


def test_plan_output_shows_control_characters_from_hosts_and_the_plan_never_obeys_them(tmp_path):
    """Host names and the plan's description come from files other people write: an ESC sequence in them (a
    terminal title, colours, clearing the screen) is printed as visible text."""
    inv = tmp_path / "inventory.yml"
    inv.write_text('all:\n  children:\n    dgx_a100: {}\n    hgx_h200: {}\n    gb200_nvl72: {}\n'
                   '    dgx_h100:\n      hosts:\n        "h100-\\e]0;owned\\a0001": {}\n        h100-0002: {}\n')
    plan = tmp_path / "plan.yml"
    plan.write_text((PLANS / "hca-firmware.yml").read_text()
                    .replace("description: ", 'description: "\\e[2J\\e[31mred\\r" #', 1)
                    .replace("../baseline.yaml", str(REPO / "inventories/lab/baseline.yaml"))
                    .replace("baselines/", str(PLANS / "baselines") + "/"))
    result = cli("rollout", "plan", plan, "-i", inv)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output and "\r" not in result.output
    assert "\\x1b[2J\\x1b[31mred\\x0d" in result.output and "h100-\\x1b]0;owned" in result.output


def test_unlock_names_a_run_once_though_its_locks_were_taken_in_different_seconds(tmp_path):
    from fabricproof.paths import state_dir

    from .test_state_lock_decisions import _died_holding, new_state

    base = state_dir()
    old = new_state(tmp_path / "runs", "run-old")
    _died_holding(base, "run-old", old.dir)
    h2 = base / "locks" / "h2.lock"
    record = json.loads(h2.read_bytes())  # a loaded machine: h2 locked a second after h1
    first = json.loads((base / "locks" / "h1.lock").read_bytes())["since"]
    h2.write_text(json.dumps({**record, "since": "2099-01-01T00:00:00Z"}))
    asked = cli("rollout", "unlock", "run-old")
    assert asked.exit_code == 2 and asked.output.count("held by run run-old") == 1, asked.output
    assert f"since {first}): h1, h2. They may be drained" in " ".join(asked.output.split()), asked.output


def test_unlock_releases_a_stopped_runs_hosts_only_when_confirmed(tmp_path):
    from fabricproof.paths import state_dir
    from fabricproof.rollout import decisions, lock

    from .test_state_lock_decisions import _died_holding, new_state

    base = state_dir()
    old = new_state(tmp_path / "runs", "run-old")
    _died_holding(base, "run-old", old.dir)
    (old.dir / st.STATE_FILE).write_text('{"apiVersion": "fabricproof/v1", "kind": "Rollo')  # truncated
    records = {h: (base / "locks" / f"{h}.lock").read_bytes() for h in ("h1", "h2")}

    assert "give the run (its id or its run directory)" in cli("rollout", "unlock").output
    asked = cli("rollout", "unlock", "run-old")
    assert asked.exit_code == 2 and "would release 2 host(s) held by run run-old (pid " in asked.output
    assert "h1, h2. They may be drained or half-changed; nothing was released: add --yes" in asked.output
    assert {h: (base / "locks" / f"{h}.lock").read_bytes() for h in ("h1", "h2")} == records

    done = cli("rollout", "unlock", str(old.dir), "--yes")  # by run directory as well as by id
    assert done.exit_code == 0 and "released 2 host(s) held by run run-old" in done.output, done.output
    assert lock.reserved(base, "run-old") == {}
    (released,) = [d for d in decisions.read(old.dir) if d["what"] == "LOCKS_RELEASED"]
    assert released["hosts"] == ["h1", "h2"] and "with `rollout unlock` by " in released["why"]
    again = cli("rollout", "unlock", "run-old", "--yes")
    assert again.exit_code == 2 and "no lock record holds run run-old: nothing to release" in again.output
    lock.acquire(base, "run-new", ["h1", "h2"]).release(finished=True)


def test_unlock_takes_an_unreadable_record_by_host_and_refuses_a_live_holder(tmp_path):
    from fabricproof.paths import state_dir
    from fabricproof.rollout import lock

    base = state_dir()
    (base / "locks").mkdir(parents=True, exist_ok=True)
    (base / "locks" / "h9.lock").write_bytes(b"\x00\x00garbage")
    done = cli("rollout", "unlock", "--host", "h9", "--yes")
    assert done.exit_code == 0 and "released 1 host(s) held by unknown holder (" in done.output, done.output
    lock.acquire(base, "run-new", ["h9"]).release(finished=True)

    live = lock.acquire(base, "run-live", ["h1"], run_dir=tmp_path / "run-live")
    try:
        refused = cli("rollout", "unlock", "run-live", "--yes")
        assert refused.exit_code == 2 and "which is running: stop it with `fabricproof rollout abort`" in refused.output
        assert lock.holder(base, "h1")["run_id"] == "run-live"
    finally:
        live.release()


def test_a_plan_whose_baseline_names_a_group_the_inventory_lacks_is_refused(tmp_path, lab_inventory):
    typo = tmp_path / "before.yaml"
    typo.write_text((REPO / "inventories/lab/baseline.yaml").read_text().replace("    dgx_h100:\n", "    dgx_h10:\n"))
    plan = tmp_path / "plan.yml"
    plan.write_text((PLANS / "hca-firmware.yml").read_text()
                    .replace("../baseline.yaml", str(typo))
                    .replace("baselines/", str(PLANS / "baselines") + "/"))
    for args in (("plan", plan, "-i", lab_inventory), ("run", plan, "-i", lab_inventory, "--runs-dir", tmp_path / "runs")):
        result = cli("rollout", *args)
        assert result.exit_code == 2, result.output
        assert "at /spec/groups/dgx_h10 no group 'dgx_h10' in inventory" in result.output
        assert "did you mean 'dgx_h100'?" in " ".join(result.output.split())
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["resume", "rollback"])
def test_resume_and_rollback_take_the_run_path_that_status_takes(tmp_path, monkeypatch, command):
    """`rollout status PATH` reads a run by its directory; resume and rollback take the same PATH, wherever the
    operator stands and whatever --runs-dir says (the run's own runs directory is where it lives)."""
    from .test_executor import FakeClock

    runs_dir, run_id, fleet = _fake_run(tmp_path, monkeypatch)
    fleet.breaks.clear()
    fleet.version["n2"] = "2.0"  # the operator fixed the halted host
    seams = runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock())
    monkeypatch.setattr(runs, "Seams", lambda: seams)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    path = runs_dir / run_id
    assert cli("rollout", "status", path).exit_code == 0
    args = ["rollout", "resume", path] if command == "resume" else ["rollback", path]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert st.RunState.load(path).status == (st.DONE if command == "resume" else st.ROLLED_BACK)
    assert not (elsewhere / "runs").exists()


def test_plan_checks_every_waves_hosts_for_the_transport_the_run_will_use(tmp_path, lab_inventory):
    text = lab_inventory.read_text().replace("h100-0004: {ansible_host: 127.10.0.4}",
                                             "h100-0004: {ansible_host: 127.10.0.4, ansible_become: true, "
                                             "ansible_become_method: su}")
    lab_inventory.write_text(text)
    refused = cli("rollout", "plan", PLANS / "hca-firmware.yml", "-i", lab_inventory)
    assert refused.exit_code == 2
    said = " ".join(refused.output.split())  # the console wraps long lines
    assert (f"{lab_inventory}: wave 2 (rest), host 'h100-0004': --via ssh cannot use its connection settings: "
            f"ansible_become_method 'su' is not supported by --via ssh") in said, refused.output
    assert cli("rollout", "plan", PLANS / "hca-firmware.yml", "-i", lab_inventory, "--via", "ansible").exit_code == 0


def test_a_slurm_drained_plan_with_an_srun_collective_gate_exits_2_before_any_host_is_touched(tmp_path, lab_inventory):
    plan = tmp_path / "plan.yml"
    plan.write_text((PLANS / "hca-firmware.yml").read_text()
                    .replace("    max_failed_hosts: 0\n", "    max_failed_hosts: 0\n    collective: {tolerance_pct: 10}\n")
                    .replace("../baseline.yaml", str(REPO / "inventories/lab/baseline.yaml"))
                    .replace("baselines/", str(PLANS / "baselines") + "/"))
    line = next(i for i, text in enumerate(plan.read_text().splitlines(), 1) if "scheduler: slurm" in text)
    for args in (("plan", plan, "-i", lab_inventory), ("run", plan, "-i", lab_inventory, "--runs-dir", tmp_path / "runs")):
        result = cli("rollout", *args)
        assert result.exit_code == 2, result.output
        (said,) = result.output.splitlines()
        assert said.startswith(f"error: {plan}:{line}: at /spec/drain/scheduler drain: {{scheduler: slurm}} "
                               "cannot be combined with a collective gate launched by srun"), said
    assert not (tmp_path / "runs").exists()
