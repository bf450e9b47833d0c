"""Issue 24.6, the smaller points an operator meets: every lab command takes --dir; ids are never cut."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fabricproof.rollout import state as st
from fabricproof.rollout.plan import Budget, Wave

from .helpers import run


def test_lab_fault_list_takes_dir_like_every_lab_command(tmp_path):
    plain = run("lab", "fault", "list", "-f", "json")
    res = run("lab", "fault", "list", "--dir", tmp_path / "lab", "-f", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(plain.stdout) and len(json.loads(res.stdout)) > 10
    assert not (tmp_path / "lab").exists()  # listing the catalog makes no lab


def _at_80_columns(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    res = subprocess.run([sys.executable, "-m", "fabricproof", *args], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_checks_list_shows_every_id_whole_at_80_columns():
    ids = [c["id"] for c in json.loads(run("checks", "list", "-f", "json").stdout)]
    lines = _at_80_columns("checks", "list").splitlines()
    assert max(len(line) for line in lines) <= 80
    starts = [line.split()[0] for line in lines if line.strip() and not line.startswith(" ")]
    assert sorted(set(ids) - set(starts)) == []  # cut ids read `fabric.cluster_uuid_…`, twice


def test_rollout_status_shows_run_ids_whole_on_one_line_at_80_columns(tmp_path):
    runs = tmp_path / "runs"
    made = []
    for name in ("hca-fw-28.42.1000", "driver-fm-535.183.01-upgrade"):
        run_id = st.new_run_id(name)
        waves = [Wave(0, "pilot", (("h1",),), (("h1",),), False, Budget(), None)]
        state = st.RunState.create(runs / run_id, run_id=run_id, plan_name=name, plan_file="/x/plan.yml",
                                   inventory="/x/inv.yml", waves=waves, who="me@here", settings={"via": "ssh"})
        state.save()
        made.append(run_id)
    text = _at_80_columns("rollout", "status", "--runs-dir", str(runs))
    for run_id in made:
        assert any(run_id in line for line in text.splitlines()), (run_id, text)
