"""Probes on real labs (sshd + paramiko, the lab's emulated probe tools): no probe starts on a node with a GPU
process or a Slurm job, the pairing of 16 nodes names the node with the degraded HCA, and Ctrl-C leaves no probe
process on a node."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from fabricproof import inventory as inventory_mod
from fabricproof import transport
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.catalog import load
from fabricproof.probes.runner import ProbeSettings, run_probes
from fabricproof.judging.evaluate import evaluate
from fabricproof.model import Outcome

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
#: Lab nominals (probelab's perfmodel): H100 all-reduce ~481 GB/s, HDR-class pair ~390 Gb/s; a degraded HCA halves.
GATES = {"ib": {"pair_bw_gbps": 300}, "nccl": {"all_reduce_busbw_gbps": 460}}


def _hosts(lab_dir: Path):
    inv = inventory_mod.load(str(lab_dir / "inventory.yml"))
    return [inv.hosts[n] for n in sorted(inv.hosts)]


def _probe(lab_dir: Path, run_dir: Path, probes, values=None, **settings):
    options = transport.configure("ssh", inventory_path=str(lab_dir / "inventory.yml"))
    events = []
    run = run_probes(_hosts(lab_dir), run_dir, probes, values=lambda h: values or {"perf": GATES}, via="ssh",
                     options=options, settings=ProbeSettings(**settings), progress=events.append)
    return run, events


def test_no_probe_starts_on_a_node_with_a_gpu_process_or_a_slurm_job(lab_factory, tmp_path):
    from fabricproof_lab import manager

    lab_dir = lab_factory.new_dir()
    lab_factory.up(lab_dir, nodes=4, profile="dgx-h100")
    manager.fault_inject(lab_dir, "h100-0002", "gpu-busy")
    manager.fault_inject(lab_dir, "h100-0003", "slurm-job")
    run, events = _probe(lab_dir, tmp_path / "run", ["nccl_all_reduce", "ib_pair_bw"])
    docs = run.facts_by_host
    for host, why in (("h100-0002", "GPU compute process(es) running"), ("h100-0003", "Slurm job steps run")):
        for probe in ("nccl_all_reduce", "ib_pair_bw"):
            record = docs[host]["collectors"][probe]
            assert record["status"] == "skipped" and why in record["error"], (host, probe, record)
            # Nothing but the guard's refusal: the probe's binary never printed a line there.
            text = (tmp_path / "run" / record["evidence"]).read_text()
            assert text.startswith("fabricproof: not run: ") and "nccl-tests" not in text and "RDMA_Write" not in text
        assert "perf" not in docs[host]
        assert not any(host in p for p in run.pairs["ib_pair_bw"])  # a busy node is never anybody's partner
    for host in ("h100-0001", "h100-0004"):
        assert docs[host]["perf"]["nccl_all_reduce"]["busbw_gbps"] > 460
    assert run.pairs["ib_pair_bw"] and all(run.pairs["ib_pair_bw"].values())


def test_require_idle_makes_the_busy_node_an_error(lab_factory, tmp_path):
    from fabricproof_lab import manager

    lab_dir = lab_factory.new_dir()
    lab_factory.up(lab_dir, nodes=2, profile="dgx-h100")
    manager.fault_inject(lab_dir, "h100-0001", "gpu-busy")
    run, _ = _probe(lab_dir, tmp_path / "run", ["nccl_all_reduce"], require_idle=True)
    record = run.facts_by_host["h100-0001"]["collectors"]["nccl_all_reduce"]
    assert record["status"] == "error" and record["error"].startswith("--require-idle: ")
    assert run.facts_by_host["h100-0002"]["collectors"]["nccl_all_reduce"]["status"] == "ok"


def test_pairing_16_nodes_names_the_node_with_the_degraded_hca(lab_factory, tmp_path):
    from fabricproof_lab import manager

    lab_dir = lab_factory.new_dir()
    lab_factory.up(lab_dir, nodes=16, profile="dgx-h100")
    manager.fault_inject(lab_dir, "h100-0006", "hca-degraded")
    t0 = time.monotonic()
    run, events = _probe(lab_dir, tmp_path / "run", ["ib_pair_bw"])
    took = time.monotonic() - t0
    blame = run.blame["ib_pair_bw"]
    assert blame["h100-0006"].verdict == "at fault", blame["h100-0006"]
    assert {h for h, b in blame.items() if b.verdict != "ok"} == {"h100-0006"}, {h: b for h, b in blame.items()}
    rounds = run.rounds["ib_pair_bw"]
    assert len(rounds) == 5  # ring (2) + shuffles to log2(16) = 4, + the localisation round
    for r in rounds:  # each host in at most one pair per round: no HCA carries two probes at once
        members = [h for p in r for h in p]
        assert len(members) == len(set(members))
    assert [e.stage for e in events if e.stage == "localise"]
    # The verdict is in each host's facts, and the at-fault check fails that host alone (perf.ib_pair_bw fails
    # every host that was in a slow pair).
    checks = [c for c in load() if c.id == "perf.ib_pair_at_fault"]
    report = evaluate(run.facts_by_host, Baseline("b", {"platform": "h100"}), checks)
    assert {r.host for r in report.results if r.outcome is Outcome.FAIL} == {"h100-0006"}
    assert {r.host for r in report.results if r.outcome is Outcome.PASS} == set(blame) - {"h100-0006"}
    print(f"\n16 nodes: {len(rounds)} rounds, {len(run.pairs['ib_pair_bw'])} pairs, {took:.1f} s")


def test_ctrl_c_stops_every_remote_probe_process(lab_factory, tmp_path):
    """SIGINT to `validate --probes` while the probe runs on both nodes: it exits 130 and no probe process is left.
    The probe is a real process that never ends by itself (the lab's emulated tools exit with their session on
    their own, which would prove nothing): perf.probes.dcgmi.path points at a loop in a directory the lab user
    can read."""
    lab_dir = lab_factory.new_dir()
    lab_factory.up(lab_dir, nodes=2, profile="dgx-h100")
    bin_dir = Path(tempfile.mkdtemp(prefix="fp-bin-", dir="/tmp"))  # not under a 0700 TMPDIR
    try:
        bin_dir.chmod(0o755)
        fake = bin_dir / "dcgmi-forever"
        fake.write_text("#!/bin/sh\nwhile :; do sleep 1; done\n")
        fake.chmod(0o755)
        base = yaml.safe_load((REPO / "inventories/lab/baseline.yaml").read_text())
        base["spec"]["defaults"]["perf"] = {"probes": {"dcgmi": {"path": str(fake)}}}
        (tmp_path / "baseline.yaml").write_text(yaml.safe_dump(base))
        _interrupt_and_look(lab_dir, tmp_path, str(fake))
    finally:
        shutil.rmtree(bin_dir, ignore_errors=True)


def _interrupt_and_look(lab_dir: Path, tmp_path: Path, marker: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "fabricproof", "validate", "-i", str(lab_dir / "inventory.yml"),
                             "-b", str(tmp_path / "baseline.yaml"), "--probes", "dcgm_diag", "--run-dir",
                             str(tmp_path / "run"), "-q"], cwd=tmp_path, env={**os.environ},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def probes_running() -> list[str]:
        out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        # The probe itself (its shell reading the script), not the guard whose argv also names it.
        return [line for line in out.splitlines() if line.split(None, 1)[-1].startswith(f"/bin/sh {marker}")]

    try:
        end = time.monotonic() + 180
        while len(probes_running()) < 2 and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.3)
        assert len(probes_running()) >= 2, "the probe never started on both nodes"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, out
        end = time.monotonic() + 30
        while probes_running() and time.monotonic() < end:
            time.sleep(0.5)
        assert not probes_running(), f"probe processes left after Ctrl-C: {probes_running()}"
        manifest = json.loads((tmp_path / "run" / "probes" / "run.json").read_text())
        assert manifest["status"] == "interrupted"  # the record says the probes were cut short, not complete
    finally:
        if proc.poll() is None:
            proc.kill()
        for line in probes_running():  # never leave one behind, even when the test failed
            os.kill(int(line.split()[0]), signal.SIGKILL)


def test_validate_probes_reports_figures_with_units_and_skips_the_busy_node(lab_factory, tmp_path):
    import json

    from typer.testing import CliRunner

    from fabricproof.cli import app
    from fabricproof_lab import manager

    lab_dir = lab_factory.new_dir()
    lab_factory.up(lab_dir, nodes=2, profile="dgx-h100")
    manager.fault_inject(lab_dir, "h100-0002", "gpu-busy")
    base = yaml.safe_load((REPO / "inventories/lab/baseline.yaml").read_text())
    base["spec"]["defaults"]["perf"] = GATES
    (tmp_path / "baseline.yaml").write_text(yaml.safe_dump(base))
    result = CliRunner().invoke(app, ["validate", "-i", str(lab_dir / "inventory.yml"), "-b",
                                      str(tmp_path / "baseline.yaml"), "--probes", "nccl_all_reduce", "-c",
                                      "perf.nccl_allreduce_busbw", "-f", "json", "--run-dir", str(tmp_path / "run"),
                                      "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    got = {r["host"]: (r["outcome"], r["reason"]) for r in report["results"]}
    assert got["h100-0001"][0] == "pass"
    assert got["h100-0002"][0] == "skip" and "GPU compute process(es) running" in got["h100-0002"][1]
    (fig,) = [f for f in report["figures"] if f["figure"] == "busbw"]
    assert fig["host"] == "h100-0001" and fig["unit"] == "GB/s" and fig["value"] > 460
    # the probes' facts are in the run's facts: validate --facts judges them again, offline
    again = CliRunner().invoke(app, ["validate", "--facts", str(tmp_path / "run"), "-b", str(tmp_path / "baseline.yaml"),
                                     "-c", "perf.nccl_allreduce_busbw", "-f", "json"])
    assert {r["host"]: r["outcome"] for r in json.loads(again.stdout)["results"]} == {"h100-0001": "pass",
                                                                                       "h100-0002": "skip"}
