"""The fabric against its plan, end to end on one lab with a real InfiniBand fabric (ibsim + opensm, Debian's real
infiniband-diags on the vantage node over real SSH), shared by every test here: a plan captured from the healthy
fabric diffs clean; the README's expansion acceptance run passes as printed; the recabling runbook drains two hosts,
proves their cabling and pairs and undrains them; each fabric fault, injected and cleared in turn, is caught through
`validate --fabric-plan` by exactly its checks, naming the cable; a rollout with a `fabric:` gate halts on the wave
whose host is miswired."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import fabricproof
from fabricproof.rollout import decisions
from fabricproof.rollout import state as st
from fabricproof_lab import manager
from fabricproof_lab.errors import LabError
from fabricproof_lab.fabric import sim

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
# The README's examples as tests/cli runs them (that folder is a package of its own; this one is not).
_spec = importlib.util.spec_from_file_location("readme_examples", REPO / "tests" / "cli" / "readme_examples.py")
readme_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_examples)
NODES, PROFILE = 8, "dgx-h100"
TARGET = "h100-0003"  # in the first scalable unit: port 3 of its leaves
NODE_CHECKS = ("ib.port_active", "ib.phys_linkup", "ib.rate")
CHECKS = ",".join(("subnet.*", *NODE_CHECKS))


@pytest.fixture(scope="module")
def lab(lab_factory) -> Iterator[Path]:
    try:
        sim.require_tools()
    except LabError as exc:
        pytest.skip(str(exc))
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=NODES, profile=PROFILE, fabric=True)
    assert status.running, status.as_dict()
    yield directory
    # stopped with the module, by PID (ibsim and opensm too), not left to the session's end
    problems = lab_factory.down([directory.parent])
    assert not problems, problems


def fp(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """The CLI as an operator runs it (this checkout's package), one process per command."""
    env = {**os.environ, "PYTHONPATH": str(Path(fabricproof.__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-m", "fabricproof", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def results(path: Path) -> dict[str, dict[str, list[dict]]]:
    """check -> outcome -> its results, from a JSON report."""
    out: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in json.loads(path.read_text())["results"]:
        out[r["check_id"]][r["outcome"]].append(r)
    return out


def cables(plan: dict) -> set[frozenset]:
    return {frozenset({(lk["a"], lk["a_port"]), (lk["b"], lk["b_port"])}) for lk in plan["links"]}


def test_a_plan_captured_from_the_healthy_fabric_is_the_lab_plan_and_diffs_clean(lab, tmp_path):
    inv = str(lab / "inventory.yml")
    cap = fp("fabric", "capture", "-i", inv, "-o", str(tmp_path / "captured.yaml"), "--run-dir", str(tmp_path / "c"))
    assert cap.returncode == 0, cap.stderr
    assert "wrote a plan of 96 cables" in cap.stderr and "review before use:" in cap.stderr
    captured = yaml.safe_load((tmp_path / "captured.yaml").read_text())
    assert cables(captured) == cables(yaml.safe_load((lab / "fabric-plan.yaml").read_text()))
    assert (tmp_path / "c" / "fabric" / "raw" / "h100-0001" / "ibnetdiscover.txt").is_file()

    diff = fp("fabric", "diff", "-i", inv, "--plan", str(tmp_path / "captured.yaml"), "--fabric-window", "0",
              "--run-dir", str(tmp_path / "d"), "-f", f"json={tmp_path / 'd.json'}")
    assert diff.returncode == 0, diff.stderr
    assert "fabric: every cable as planned" in diff.stderr
    judged = results(tmp_path / "d.json")
    assert set(judged) == {f"subnet.{c}" for c in ("cable_placement", "cable_present", "cable_unplanned", "link_width",
                                                  "link_speed", "rail_aligned", "names_unique", "switch_errors",
                                                  "sm_master")}
    assert all(set(by) == {"pass"} and len(by["pass"]) == NODES for by in judged.values())


def test_the_readme_expansion_acceptance_run_passes_as_printed(lab, tmp_path):
    """The README's commands, run by bash exactly as printed, in a directory holding what they name: the cabling
    sheet (the lab plan's cables as an NDT CSV, hosts by their HCA's description), the lab's inventory, a baseline."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "inventory.yml").symlink_to(lab / "inventory.yml")
    (ws / "baseline.yaml").write_text((REPO / "inventories" / "lab" / "baseline.yaml").read_text())
    with open(ws / "cabling.csv", "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["#StartDevice", "StartPort", "EndDevice", "EndPort", "LinkType"])
        for lk in yaml.safe_load((lab / "fabric-plan.yaml").read_text())["links"]:
            host, _, _ = lk["a"].partition(" ")
            start = (host, lk["a"]) if " " in lk["a"] else (lk["a"], f"Port {lk['a_port']}")
            out.writerow([*start, lk["b"], f"Port {lk['b_port']}", "Infiniband"])
    readme_examples.shim(ws / ".bin")
    section = readme_examples.section(REPO / "README.md", "#### Expansion acceptance run")
    commands = readme_examples.commands(section)
    assert len(commands) == 3, commands
    for command in commands:
        done = readme_examples.run(command, ws, ws / ".bin", timeout=900)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
    assert len(cables(yaml.safe_load((ws / "fabric-plan.yaml").read_text()))) == 96
    assert 'failures="0"' in (ws / "acceptance.xml").read_text()


def test_the_recabling_runbook_drains_proves_the_cabling_and_the_pairs_then_undrains(lab, tmp_path):
    """The shipped runbook, pointed at this lab (its plan and the repository's baseline), on two hosts given with
    --limit as `fabric diff` would name them: drain, the recabling confirmed (--yes), one validate step proving the
    cabling against the plan, the links and ib_pair_bw between them, undrain."""
    book = (REPO / "inventories" / "lab" / "runbooks" / "recable.yml").read_text()
    book = book.replace("/var/lib/fabricproof/lab/fabric-plan.yaml", str(lab / "fabric-plan.yaml"))
    book = book.replace("../baseline.yaml", str(REPO / "inventories" / "lab" / "baseline.yaml"))
    (tmp_path / "recable.yml").write_text(book)
    done = fp("runbook", "run", str(tmp_path / "recable.yml"), "-i", str(lab / "inventory.yml"), "--limit",
              f"{TARGET},h100-0004", "--yes", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    run_dir = next((tmp_path / "runs").iterdir())
    steps = [d for d in decisions.read(run_dir) if d["what"].startswith("STEP_")]
    assert [d["what"] for d in steps] == ["STEP_DONE"] * 4
    proof = Path(run_dir / steps[2]["evidence"][-1])
    assert (proof / "fabric" / "fabric.json").is_file() and (proof / "probes" / "facts" / f"{TARGET}.json").is_file()
    report = json.loads((proof / "report.json").read_text())
    judged = {(r["check_id"], r["host"]): r["outcome"] for r in report["results"]}
    # the pair probe ran between the two (the lab's baseline sets no pair_bw_gbps: perf.ib_pair_bw is skipped saying
    # so, and the pairing's verdict judges them against each other)
    assert judged[("subnet.cable_placement", TARGET)] == judged[("perf.ib_pair_at_fault", TARGET)] == "pass"


#: The fabric faults in rounds injected together on TARGET: in a round no two share a check (so each failing check is
#: its one fault's) nor an HCA or a leaf port (so none changes what another edits). link-1x, link-slow and
#: hca-unplugged all fail ib.rate, hence three rounds; uplink-missing and extra-link are kept apart (a missing
#: uplink beside an unplanned one on the same leaf could read as a moved cable). A round goes in with one
#: fault_inject, one change of the simulator (a restart of ibsim at most, for a width, a speed or a description).
ROUNDS = (("subnet-rails-swapped", "subnet-link-1x"),
          ("subnet-hca-wrong-port", "subnet-switch-errors", "subnet-uplink-missing", "subnet-link-slow"),
          ("subnet-hca-unplugged", "subnet-extra-link", "subnet-duplicate-desc"))


def test_each_fabric_fault_is_caught_by_exactly_its_checks_naming_the_cable(lab, tmp_path):
    """Each fault on TARGET, through validate --fabric-plan, a round of faults that share no check at a time (one
    collection and one change of the simulator a round, not one a fault): the checks failing anywhere in the fleet
    are exactly the round's faults' subnet checks and the node checks they name, TARGET fails each of them, and every
    failure's finding names the cable (a port) or, for a shared description, the HCA. A round's residue would show
    up as an extra failure of the next one; the fleet is clean again at the end."""
    inv, plan = str(lab / "inventory.yml"), str(lab / "fabric-plan.yaml")
    faults = {f["name"]: f for f in manager.faults() if f["kind"] == "fabric" and PROFILE in f["profiles"]}
    assert len(faults) >= 8
    assert sorted(n for r in ROUNDS for n in r) == sorted(faults), "every fabric fault in exactly one round"
    mismatches = []
    for n, names in enumerate(ROUNDS):
        wants = {name: set(faults[name]["catches_subnet"])
                 | (set(faults[name]["catches_by_profile"][PROFILE]) & set(NODE_CHECKS)) for name in names}
        assert not [c for a in names for b in names if a < b for c in wants[a] & wants[b]], f"round {names} shares"
        manager.fault_inject(lab, TARGET, *names)
        report = tmp_path / f"{n}.json"
        done = fp("validate", "-i", inv, "-b", str(REPO / "inventories" / "lab" / "baseline.yaml"), "--fabric-plan",
                  plan, "--fabric-window", "1", "--checks", CHECKS, "--fail-on", "warning", "--run-dir",
                  str(tmp_path / str(n)), "-q", "-f", f"json={report}")
        manager.fault_clear(lab, TARGET)
        judged = results(report)
        failed = {c for c, by in judged.items() if "fail" in by}
        want = set().union(*wants.values())
        unjudged = {c for c, by in judged.items() if set(by) & {"error", "unknown"}}
        if done.returncode != 1 or failed != want or unjudged:
            mismatches.append(f"{'+'.join(names)}: exit {done.returncode}, failed {sorted(failed)}, catches "
                              f"{sorted(want)}, unjudged {sorted(unjudged)}; {done.stderr[-500:]}")
            continue
        for name in names:
            for check in faults[name]["catches_subnet"]:
                on_target = [r for r in judged[check]["fail"] if r["host"] == TARGET]
                texts = [f["text"] for r in judged[check]["fail"] for f in r["findings"]]
                if not on_target or not texts:
                    mismatches.append(f"{name}: {check} does not fail {TARGET}")
                elif not all(" port " in t or (check == "subnet.names_unique" and TARGET in t) for t in texts):
                    mismatches.append(f"{name}: {check} names no cable: {texts}")
    assert not mismatches, "\n".join(mismatches)
    clean = fp("validate", "-i", inv, "-b", str(REPO / "inventories" / "lab" / "baseline.yaml"), "--fabric-plan",
               plan, "--fabric-window", "1", "--checks", CHECKS, "--fail-on", "warning", "--run-dir",
               str(tmp_path / "clean"), "-q")
    assert clean.returncode == 0, clean.stdout[-2000:]


def test_a_rollout_with_a_fabric_gate_halts_on_the_miswired_wave(lab, tmp_path):
    """The pilot's cables are as planned; the next wave's host has two rails crossed: its node checks pass (both
    ports Active at full rate), the fabric gate fails it, and the plan's halt policy stops the rollout there."""
    for name in ("apply.yml", "rollback.yml"):  # the change itself is beside the point: a task that touches nothing
        (tmp_path / name).write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                                     "    - ansible.builtin.debug: {msg: expansion wave}\n")
    (tmp_path / "plan.yml").write_text(yaml.safe_dump({
        "apiVersion": "fabricproof/v1", "kind": "RolloutPlan", "metadata": {"name": "expansion-wave"},
        "spec": {"inventory": str(lab / "inventory.yml"), "target": f"h100-0001:{TARGET}",
                 "change": {"apply": {"playbook": "apply.yml"}, "rollback": {"playbook": "rollback.yml"}},
                 "baseline": {"before": str(REPO / "inventories" / "lab" / "baseline.yaml"),
                              "after": str(REPO / "inventories" / "lab" / "baseline.yaml")},
                 "waves": [{"name": "pilot", "size": {"pattern": "h100-0001"}}, {"name": "rest", "size": "rest"}],
                 "gates": {"checks": list(NODE_CHECKS), "retry_interval": "2s", "timeout": "10s",
                           "fabric": {"plan": str(lab / "fabric-plan.yaml"), "window": "0s"}},
                 "on_failure": "halt"}}, sort_keys=False))
    manager.fault_inject(lab, TARGET, "subnet-rails-swapped")
    try:
        done = fp("rollout", "run", str(tmp_path / "plan.yml"), "--runs-dir", str(tmp_path / "runs"))
    finally:
        manager.fault_clear(lab, TARGET)
    assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-3000:])
    run_dir = next((tmp_path / "runs").iterdir())
    state = st.RunState.load(run_dir)
    assert state.status == st.HALTED
    assert state.hosts["h100-0001"]["state"] == st.PASSED and state.hosts[TARGET]["state"] == st.FAILED
    gate = [d for d in decisions.read(run_dir) if d["what"] == "FABRIC_GATE"]
    assert [d["wave"] for d in gate] == ["pilot", "rest"] and gate[1]["hosts"] == [TARGET]
    assert f"{TARGET} mlx5_0 port 1 and {TARGET} mlx5_1 port 1 are swapped" in gate[1]["why"]
    assert (run_dir / "waves" / "2-rest" / "post-gate" / "fabric" / "fabric" / "fabric.json").is_file()
