"""Paths an operator gives relative to the shell's directory reach ansible-runner whole: it runs ansible-playbook
from its own private data directory, where a relative inventory names nothing (every playbook step failed)."""

from __future__ import annotations

import os

import pytest

from fabricproof.rollout import decisions

from .rehearsal import cli

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_runbook_run_with_a_relative_inventory_runs_its_playbook_steps(h100_lab, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "touch.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                                    "    - ansible.builtin.raw: 'true'\n")
    (work / "book.yml").write_text("apiVersion: fabricproof/v1\nkind: Runbook\nmetadata: {name: relative}\nspec:\n"
                                   "  steps:\n    - name: Touch every node\n      playbook: touch.yml\n")
    monkeypatch.chdir(work)
    relative = os.path.relpath(h100_lab.inventory, work)
    assert not os.path.isabs(relative)
    result = cli("runbook", "run", "book.yml", "-i", relative, "--yes", "--runs-dir", "runs")
    assert result.exit_code == 0, result.output
    run_dir = next((work / "runs").iterdir())
    done = [d for d in decisions.read(run_dir) if d["what"] == "STEP_DONE"]
    assert len(done) == 1 and "touch.yml ok on 1 host(s)" in done[0]["why"], decisions.read(run_dir)
