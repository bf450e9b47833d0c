"""The leaf and cross_leaf scales on the lab's InfiniBand fabric (issue 22.5): 16 GB200 trays behind a real Slurm,
cabled to the lab's ibsim fabric (4 scalable units of 4 trays, a leaf per rail, 2 spines), every collective a real
`srun` job step whose emulated figure takes the fabric's share (emu.fabricpaths). Healthy, both scales pass; a missing
uplink shows only across leaves and the search names the leaf's path to the spines, no tray; crossed rails on one tray
slow its leaf and the search names that tray. One lab for the module; each case's fabric fault is put in through the
lab (ibsim's console) and cleared after it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.catalog import load
from fabricproof.judging.evaluate import evaluate
from fabricproof.model import Outcome
from fabricproof.probes import collective, isolation
from fabricproof.subnet.plan import load_plan
from fabricproof_lab import manager
from fabricproof_lab.emu.faults import FAULTS
from labkit import LabFactory

from .slurmlab import REPO, SlurmLab, running
from .test_collective import emulators, idle, values

pytestmark = [pytest.mark.lab, pytest.mark.slurm]

NODES = 16
HOSTS = [f"gb200-{i:04d}" for i in range(1, NODES + 1)]
# Over InfiniBand (multi-node NVLink off at the leaf scales) a tray's 4 x NDR 400 give ~165 GB/s; the fabric's share
# halves it across a leaf short of one of its two uplinks, and for a rail a crossed cable sends through the spines.
THRESHOLDS = {"leaf": 155.0, "cross_leaf": 155.0}


@pytest.fixture(scope="module")
def rack(lab_factory: LabFactory) -> Iterator[SlurmLab]:
    with running(lab_factory, nodes=NODES, fabric=True, health=False) as sl:
        yield sl


def leaves(sl: SlurmLab) -> dict[str, str]:
    """Each tray's leaf, from the plan `lab up --fabric` wrote (its roles), as `collective run --fabric-plan` reads
    it."""
    return collective.leaves(load_plan(sl.lab.dir / "fabric-plan.yaml"), HOSTS)


def run_scale(sl: SlurmLab, scale: str, tmp_path, search: bool = False):
    """One round of the scale's groups at once (or the search over them): the launches and the verdict."""
    groups = collective.groups(scale, HOSTS, leaves=leaves(sl))
    run = collective.Collective(values(sl, thresholds=THRESHOLDS), scale, tmp_path / scale, env=sl.cluster.env())
    if not search:
        return run, run(groups), None
    verdict = isolation.search([h for g in groups for h in g], run,
                               collective.search_settings(values(sl, thresholds=THRESHOLDS), scale), groups=groups,
                               leaves=leaves(sl))
    return run, None, verdict


def test_the_leaves_come_from_the_labs_plan_and_both_scales_pass_on_the_healthy_fabric(rack, tmp_path):
    idle(rack)
    by_leaf = leaves(rack)
    assert sorted(set(by_leaf.values())) == [f"leaf-su{su}-r0" for su in range(1, 5)]
    assert collective.groups("leaf", HOSTS, leaves=by_leaf) == [HOSTS[i:i + 4] for i in range(0, 16, 4)]
    for scale in ("leaf", "cross_leaf"):
        run, outs, _ = run_scale(rack, scale, tmp_path)
        assert len(outs) == 4 and all(o.figure and o.figure > THRESHOLDS[scale] * 1.05 for o in outs), (scale, outs)
        assert all("--export=ALL,NCCL_MNNVL_ENABLE=0" in la.argv for la in run.launches)
    assert not rack.cluster.jobs() and not emulators(rack)


def test_a_missing_uplink_fails_only_across_leaves_and_the_search_names_the_leafs_path(rack, tmp_path):
    """Rail-local groups pass and every cross-leaf group is slow (each holds a tray of that leaf's unit); `collective
    run --scale cross_leaf --search`, as an operator types it, names the leaf's path to the spines and no tray, and
    cites the fabric's diff against the lab's plan: the uplink missing."""
    idle(rack)
    base = tmp_path / "baseline.yaml"
    base.write_text(yaml.safe_dump({"apiVersion": "fabricproof/v1", "kind": "Baseline", "metadata": {"name": "t"},
                                    "spec": {"defaults": values(rack, thresholds=THRESHOLDS)}}))
    manager.fault_inject(rack.lab.dir, "gb200-0002", "subnet-uplink-missing")  # leaf-su1-r0: 1 of its 2 uplinks
    try:
        _run, leaf_outs, _ = run_scale(rack, "leaf", tmp_path)
        _run, cross_outs, _ = run_scale(rack, "cross_leaf", tmp_path / "x")
        proc = subprocess.run(
            [sys.executable, "-m", "fabricproof", "collective", "run", "-i", str(rack.inventory), "-b", str(base),
             "--scale", "cross_leaf", "--fabric-plan", str(rack.lab.dir / "fabric-plan.yaml"), "--search",
             "-o", str(tmp_path / "run"), "-f", f"json={tmp_path / 'report.json'}"],
            env=rack.cluster.env(PYTHONPATH=str(REPO / "cli")), capture_output=True, text=True, timeout=900)
    finally:
        idle(rack)
    assert all(o.figure > THRESHOLDS["leaf"] * 1.05 for o in leaf_outs), leaf_outs  # rail-local: no spine
    assert all(o.figure < THRESHOLDS["cross_leaf"] * 0.6 for o in cross_outs), cross_outs
    # every tray's cross-leaf figure is below the floor (exit 1); the search blames the fabric, no tray
    assert proc.returncode == 1 and "search: at fault" in proc.stderr, proc.stderr[-3000:]
    search = json.loads((tmp_path / "run" / "collective.json").read_text())["search"]
    assert search["paths"] == [["leaf-su1-r0", isolation.SPINES]] and not search["hosts"] and not search["pairs"], \
        search
    (found,) = search["findings"]
    assert [f["check"] for f in found["fabric"]] == ["subnet.cable_present"], found["fabric"]
    assert "leaf-su1-r0 port" in found["fabric"][0]["sentence"] and search["fabric_error"] is None
    report = json.loads((tmp_path / "report.json").read_text())
    assert not [r for r in report["results"] if r["check_id"] == "perf.collective_at_fault" and r["outcome"] == "fail"]
    assert not rack.cluster.jobs() and not emulators(rack)


def test_crossed_rails_slow_their_trays_leaf_and_the_search_names_the_tray(rack, tmp_path):
    idle(rack)
    manager.fault_inject(rack.lab.dir, "gb200-0007", "subnet-rails-swapped")  # mlx5_0/mlx5_1 on each other's leaf
    try:
        _run, outs, _ = run_scale(rack, "leaf", tmp_path)
        run, _, verdict = run_scale(rack, "leaf", tmp_path / "s", search=True)
    finally:
        idle(rack)
    slow = [g for g, o in zip(collective.groups("leaf", HOSTS, leaves=leaves(rack)), outs, strict=True)
            if o.figure < THRESHOLDS["leaf"]]
    assert slow == [HOSTS[4:8]], outs
    assert verdict.hosts == ("gb200-0007",) and not verdict.paths and not verdict.pairs, verdict.to_facts()
    # the fault's declared collective check fails on that tray alone
    checks = [c for c in load() if c.id in FAULTS["subnet-rails-swapped"].catches_collective]
    report = evaluate(collective.facts_documents(run, verdict, {}), Baseline("b", values(rack, thresholds=THRESHOLDS)),
                      checks)
    assert checks and {r.host for r in report.results if r.outcome is Outcome.FAIL} == {"gb200-0007"}
    assert not rack.cluster.jobs() and not emulators(rack)
