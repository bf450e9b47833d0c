"""Helpers the lab rollout rehearsals share: the CLI in-process and in a killable subprocess, plans derived from
the shipped examples, waiting on a run's state, and reading what a run did to the lab's nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fabricproof.judging import baseline as baseline_mod
from fabricproof.judging import catalog as catalog_mod
from fabricproof import inventory as inventory_mod
from fabricproof.rollout import decisions
from fabricproof.rollout import state as st
from fabricproof.rollout.gate import prove
from fabricproof.rollout.runs import live_collect
from typer.testing import CliRunner

from .entry import app

REPO = Path(__file__).resolve().parents[2]
PLANS = REPO / "inventories" / "lab" / "plans"
ENTRY = Path(__file__).with_name("entry.py")
BEFORE = "535.161.08"
AFTER = "535.183.01"


def cli(*args: object):
    return CliRunner().invoke(app(), [str(a) for a in args], catch_exceptions=False)


def spawn(*args: object, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The CLI in its own process (so it can be SIGKILLed), stderr kept for the failure message; `env` adds
    variables (entry.py's FABRICPROOF_TEST_KILL_AFTER)."""
    return subprocess.Popen([sys.executable, str(ENTRY), *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=log.open("w"), cwd=REPO, env={**os.environ, **(env or {})})


def derived_plan(tmp_path: Path, shipped: str, **spec: object) -> Path:
    """A shipped example plan with some spec keys replaced (lab-sized waves, a shorter soak, no drain)."""
    doc = yaml.safe_load((PLANS / shipped).read_text())
    doc["spec"]["baseline"] = {k: str((PLANS / v).resolve()) for k, v in doc["spec"]["baseline"].items()}
    for key, value in spec.items():
        if value is None:
            doc["spec"].pop(key, None)
        else:
            doc["spec"][key] = value
    path = tmp_path / shipped
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run exited ({proc.returncode}) before {what}: {log.read_text() if log else ''}")
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}" + (f": {log.read_text()}" if log else ""))



def exit_of(proc: subprocess.Popen, timeout: float, log: Path, runs_dir: Path | None = None) -> int:
    """The run's exit code; a run still going after `timeout` is killed and the test fails with its stderr and,
    given its runs_dir, the steps and decisions it had reached (what a CI log needs to tell a hang from a slow run)."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    run = the_run(runs_dir) if runs_dir is not None else None
    reached = "" if run is None else (f"\nsteps: {json.dumps(run.data['steps'], default=str)}"
                                      f"\ndecisions: {[(d['what'], d.get('why', '')) for d in decisions.read(run.dir)]}")
    pytest.fail(f"the run was still going after {timeout}s (killed): {log.read_text()}{reached}")

def the_run(runs_dir: Path) -> st.RunState | None:
    found = st.list_runs(runs_dir)
    return found[-1] if found else None


def step_started(runs_dir: Path, sid: str) -> bool:
    run = the_run(runs_dir)
    return bool(run and (run.step(sid) or {}).get("status") == "started")


def whats(run_dir: Path) -> list[str]:
    return [d["what"] for d in decisions.read(run_dir)]


def prove_fleet(lab, baseline_file: Path, checks: list[str], hosts: list[str], tmp_path: Path) -> dict:
    """Collect the hosts over SSH now and evaluate them: host -> reasons it fails (empty: proven)."""
    inv = inventory_mod.load(lab.inventory)
    selected = catalog_mod.select(catalog_mod.load(), checks)
    collect = live_collect(inv, selected, "ssh", "verify", str(lab.inventory))
    proof = prove(hosts, baseline_mod.load(baseline_file), selected, collect, tmp_path / f"verify-{time.monotonic_ns()}",
                  groups=inv.groups_of())
    assert not proof.report.collection_errors
    return proof.failures


def driver_of(node: dict) -> tuple[str, str, str]:
    """(loaded kernel module, nvidia-driver package, Fabric Manager package) upstream versions of a lab node."""
    pkgs = node["packages"]
    return (node["driver"]["loaded"], pkgs["nvidia-driver-535"].split("-")[0],
            pkgs["nvidia-fabricmanager-535"].split("-")[0])


#: Ansible runner idents of every apply batch, and of the rollback batches only (rb<N>.w<k>.apply.b<j>).
APPLIES, ROLLBACKS = "*_apply_*", "*_rb*_apply_*"


def install_events(run_dir: Path, idents: str = APPLIES) -> dict[str, int]:
    """Per host, how many times the install task (install.yml, shared by the apply and rollback playbooks)
    changed the node in the playbook runs matching `idents` (from ansible-runner events)."""
    counts: dict[str, int] = {}
    for path in (run_dir / "ansible" / "artifacts").glob(f"{idents}/job_events/*.json"):
        ev = json.loads(path.read_text())
        data = ev.get("event_data") or {}
        if (ev.get("event") == "runner_on_ok" and data.get("task") == "Install the driver and Fabric Manager at the "
                "same version" and (data.get("res") or {}).get("changed")):
            counts[data["host"]] = counts.get(data["host"], 0) + 1
    return counts


