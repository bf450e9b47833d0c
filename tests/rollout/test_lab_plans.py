"""The shipped example plans, their after-baselines and the playbooks: valid, in step with the lab baseline, and
accepted by ansible-playbook."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fabricproof.judging import catalog
from fabricproof.inventory import from_list_json
from fabricproof.model import Severity
from fabricproof.rollout.plan import compute_waves, load
from fabricproof.rollout.playbook import runner_env
from catalogkit import shipped_checks

REPO = Path(__file__).resolve().parents[2]
PLANS = REPO / "inventories" / "lab" / "plans"
LAB_BASELINE = yaml.safe_load((REPO / "inventories" / "lab" / "baseline.yaml").read_text())
CATALOG = shipped_checks()

# plan file -> (after-baseline, the only baseline values the change may move: group -> dotted key -> new value)
EXPECTED = {
    "driver-fm-upgrade.yml": ("lab-driver-535.183.01.yaml",
                              {"dgx_h100": {"driver.version": "535.183.01", "fm.version": "535.183.01"}}),
    "hca-firmware.yml": ("lab-hca-fw-28.42.1000.yaml", {"dgx_h100": {"ib.fw": "28.42.1000"}}),
    "nvswitch-firmware.yml": ("lab-nvswitch-fw-96.10.73.yaml", {"dgx_h100": {"nvswitch.firmware": "96.10.73.00.01"}}),
    "roce-config.yml": ("lab-roce-gid3.yaml", {"hgx_h200": {"roce.gid_index": 3}}),
}


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


@pytest.mark.parametrize("plan_file", sorted(EXPECTED))
def test_after_baseline_moves_only_what_the_change_changes(plan_file):
    after_file, changes = EXPECTED[plan_file]
    plan = load(PLANS / plan_file, CATALOG)
    assert plan.after == PLANS / "baselines" / after_file
    assert plan.before == REPO / "inventories" / "lab" / "baseline.yaml"
    after = yaml.safe_load(plan.after.read_text())
    assert _flatten(after["spec"]["defaults"]) == _flatten(LAB_BASELINE["spec"]["defaults"])
    for group, values in LAB_BASELINE["spec"]["groups"].items():
        before_flat, after_flat = _flatten(values), _flatten(after["spec"]["groups"][group])
        moved = {k: v for k, v in after_flat.items() if before_flat.get(k, object()) != v}
        assert moved == changes.get(group, {}), f"{plan_file} {group}: run python tests/rollout/make_after_baselines.py"
        assert set(before_flat) <= set(after_flat)


def test_after_baselines_are_generated_from_the_lab_baseline():
    from .make_after_baselines import AFTER, render

    for name in AFTER:
        assert (PLANS / "baselines" / f"{name}.yaml").read_text() == render(name, LAB_BASELINE), (
            f"{name} is stale: run python tests/rollout/make_after_baselines.py")


def test_example_plans_rehearse_on_a_lab_of_four_h100():
    hosts = [f"h100-000{i}" for i in range(1, 5)]
    inv = from_list_json({"_meta": {"hostvars": {h: {} for h in hosts}}, "dgx_h100": {"hosts": hosts}}, "lab")
    for name in ("driver-fm-upgrade.yml", "hca-firmware.yml", "nvswitch-firmware.yml"):
        waves = compute_waves(load(PLANS / name, CATALOG), inv)
        assert waves[0].hosts == ("h100-0001",) and sum(len(w.hosts) for w in waves) == 4, name
    assert [len(w.hosts) for w in compute_waves(load(PLANS / "driver-fm-upgrade.yml", CATALOG), inv)] == [1, 1, 2]


def test_example_plans_gate_and_soak_with_checks_that_apply():
    for name in EXPECTED:
        plan = load(PLANS / name, CATALOG)
        assert plan.gates.checks and plan.soak is not None
        gate = catalog.select(CATALOG, list(plan.gates.checks))
        threshold = Severity(plan.gates.fail_on).rank
        ignored = [c.id for c in gate if c.severity.rank < threshold]
        assert not ignored, f"{name}: gate checks below fail_on can never stop a wave: {ignored}"
        soak = catalog.select(CATALOG, list(plan.soak.checks))
        assert any(c.severity.value == "critical" for c in soak), f"{name}: no soak check can stop the rollout"


def test_every_playbook_passes_ansible_syntax_check():
    books = sorted(str(p) for p in (REPO / "playbooks").rglob("*.yml")
                   if p.parent.name not in ("driver-fm-upgrade", "hca-firmware", "nvswitch-firmware", "roce-config")
                   or p.stem in ("apply", "rollback"))
    assert len(books) >= 12
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "--syntax-check",
                           *books], capture_output=True, text=True, check=False, env={**runner_env(), "HOME": str(Path.home())})
    assert proc.returncode == 0, proc.stdout + proc.stderr
