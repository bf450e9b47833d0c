"""The fault matrix on real labs, one per profile: every lab fault, injected on one node, makes exactly its named
checks fail on exactly that node; clearing the faults brings the fleet back to a pass.

All faults of a profile are injected at once, on every other node, so healthy nodes keep the majority that fleet
checks judge outliers against (n + 1 of 2n + 1, and half of each 18-tray GB200 rack), and one collection over real
SSH proves them all.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from fabricproof.judging import baseline as baseline_mod
from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.judging.evaluate import evaluate, exit_code
from fabricproof.inventory import load as load_inventory
from fabricproof_lab import manager
from fabricproof.model import Outcome
from fabricproof.paths import inventories_dir
from catalogkit import shipped_checks

pytestmark = pytest.mark.lab

STRIDE = 2  # the least spacing that keeps healthy nodes a majority: ~80 nodes a profile to start and collect
CHECKS = shipped_checks()
# A hanging tool costs one command timeout per nvidia-smi collector (six of them, sequential in the host's one
# exec); tests/transport/test_ssh_lab.py proves that fault, so the matrix leaves it out to keep the suite short. A
# flooding tool prints 300 MiB per node: tests/transport/test_flood_lab.py proves it.
SKIPPED_FAULTS = {"tool-hangs", "tool-floods"}
# Fabric faults need a lab with an InfiniBand fabric (`lab up --fabric`): tests/lab/test_lab_fabric.py proves what
# each does to the real tools' output, and the fabric diff's matrix proves the checks they name.
SKIPPED_KINDS = {"fabric"}


def _reads(check) -> set[str]:
    """Collectors a check depends on: its own, and those providing a fact its expectation refers to."""
    pointers = [e["fact"] for e in (check.expected, *(c.expected for c in check.where)) if isinstance(e, dict) and "fact" in e]
    return {check.collector} | {c.id for c in COLLECTORS.values() for p in pointers
                                if p == c.provides or p.startswith(c.provides + "/")}


def _faults_for(profile: str) -> list[dict]:
    # a fault only a collective across nodes shows is proven through real srun (tests/slurm/test_collective.py)
    return [f for f in manager.faults() if profile in f["profiles"] and f["name"] not in SKIPPED_FAULTS
            and f["kind"] not in SKIPPED_KINDS and not f["catches_collective"]]


def _prove(lab_dir: Path, run_dir: Path, only: set[str] | None = None, kept: dict | None = None):
    """Collect the lab's hosts (`only` these, if given) over real SSH and judge the whole fleet: the facts collected
    now, over those `kept` from an earlier collection of the hosts not collected again. Returns (report, facts)."""
    inv = load_inventory(str(lab_dir / "inventory.yml"))
    hosts = [inv.hosts[h] for h in sorted(inv.hosts) if only is None or h in only]
    # The cap only bounds a collector that hangs by accident (the hang fault is left out above); it is generous
    # because a 4 s cap has flaked on a loaded two-core machine.
    result = collect(hosts, run_dir, via="ssh", forks=32, command_timeout_s=20)
    facts = {**(kept or {}), **result.facts_by_host}
    base = baseline_mod.load(inventories_dir() / "lab" / "baseline.yaml")
    report = evaluate(facts, base, CHECKS, groups={h.name: h.groups for h in inv.hosts.values()},
                      collection_errors=result.collection_errors)
    return report, facts


@pytest.mark.parametrize("profile", ["dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72"])
def test_each_fault_fails_exactly_its_checks_on_exactly_its_node(lab_factory, profile):
    faults = _faults_for(profile)
    lab_dir = lab_factory.new_dir()
    status = lab_factory.up(lab_dir, nodes=STRIDE * len(faults) + 1, profile=profile)
    hosts = [h.name for h in status.lab.hosts]
    planted = {hosts[STRIDE * i]: f for i, f in enumerate(faults)}
    for host, fault in planted.items():
        manager.fault_inject(lab_dir, host, fault["name"])

    report, facts = _prove(lab_dir, lab_dir.parent / "broken")
    failed: dict[str, set[str]] = defaultdict(set)
    errored: dict[str, set[str]] = defaultdict(set)
    for r in report.results:
        if r.outcome is Outcome.FAIL:
            failed[r.host].add(r.check_id)
        elif r.outcome in (Outcome.ERROR, Outcome.UNKNOWN):
            errored[r.host].add(r.check_id)
    assert exit_code(report) == 1
    assert set(failed) <= set(planted), f"healthy nodes failed: {sorted(set(failed) - set(planted))}"
    assert not report.collection_errors
    checks = {c.id: c for c in CHECKS}
    mismatches = []
    for host, fault in planted.items():
        want = set(fault["catches_by_profile"][profile]) | set(fault["catches_fleet_by_profile"][profile])
        if failed[host] != want:
            mismatches.append(f"{fault['name']} on {host}: failed {sorted(failed[host])}, catches {sorted(want)}")
        # A broken tool is an error of the checks that read it, never a silent pass or a failure elsewhere.
        broken = set(fault.get("breaks", ()))
        for cid in errored[host]:
            if not _reads(checks[cid]) & broken:
                mismatches.append(f"{fault['name']} on {host}: {cid} not judged but {checks[cid].collector} works")
        if broken & {c.id for c in COLLECTORS.values() if c.default}:
            assert errored[host], f"{fault['name']} broke {broken} but no check reported it"
    assert not mismatches, "\n".join(mismatches)

    # Clearing changes the planted nodes only: they are collected again, and the fleet is judged with the healthy
    # nodes' facts of the collection above (a third of the hosts to collect instead of all of them).
    for host in planted:
        manager.fault_clear(lab_dir, host)
    mended, _ = _prove(lab_dir, lab_dir.parent / "mended", only=set(planted), kept=facts)
    assert exit_code(mended) == 0, [(r.check_id, r.host, r.reason) for r in mended.results if r.outcome is not Outcome.PASS
                                    and r.outcome is not Outcome.SKIP][:10]
