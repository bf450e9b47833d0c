"""run_probes() through the local transport and a real /bin/sh: each host's own argv from its baseline values, the
idle guard's refusals recorded as skips (errors with require_idle), the budget, figures with their units. Stand-ins
answer for the GPU tools (the corpus's real all_reduce_perf output); the lab tests run the same on SSH."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fabricproof.probes.options import select_probes
from fabricproof.probes.runner import ProbeSettings, run_probes
from fabricproof.errors import InputError
from fabricproof.model import Host
from fabricproof.transport.local import LocalOptions

H100 = "nccl-tests/all-reduce-h100-1node-8gpu-tests2.17.8-nccl2.29.2-wrong-col-maxbytes-reduced.txt"


@pytest.fixture
def node(tmp_path: Path, corpus: Path) -> dict:
    """A PATH with nvidia-smi (GPU_APPS: its compute processes), an idle scontrol, and an NCCL bin dir whose
    all_reduce_perf records its argv and prints a real output (after SLEEP seconds)."""
    bin_dir, nccl = tmp_path / "bin", tmp_path / "nccl"
    bin_dir.mkdir()
    nccl.mkdir()
    (bin_dir / "nvidia-smi").write_text('#!/bin/sh\n[ -n "$GPU_APPS" ] && printf "%s\\n" "$GPU_APPS"\nexit 0\n')
    # This node runs no Slurm job, whatever the machine does: the real-Slurm tests may run slurmd and a job here
    # meanwhile, and /usr/bin/scontrol would show their steps to the idle guard.
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "No job steps exist on this node."\nexit 1\n')
    for name in ("all_reduce_perf", "all_gather_perf"):
        (nccl / name).write_text(f'#!/bin/sh\necho "$0 $*" >>{tmp_path}/argv\nsleep "${{SLEEP:-0}}"\n'
                                 f'cat {corpus / H100}\n')
    for f in (*bin_dir.iterdir(), *nccl.iterdir()):
        f.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    values = {"perf": {"probes": {"nccl_tests": {"bin_dir": str(nccl), "max_bytes": "1G"}}}, "gpu": {"count": 4}}
    return {"env": env, "values": values, "argv": tmp_path / "argv", "run": tmp_path / "run"}


def probe(node: dict, probes=("nccl_all_reduce",), settings=ProbeSettings(), **env):
    events = []
    run = run_probes([Host("node1")], node["run"], list(probes), values=lambda h: node["values"], via="local",
                     options=LocalOptions(env={**node["env"], **env}), settings=settings, progress=events.append)
    return run, events


def test_the_probe_runs_with_the_hosts_own_argv_and_gives_figures_with_units(node):
    run, events = probe(node)
    assert node["argv"].read_text().split("\n")[0].endswith("all_reduce_perf -b 8 -e 1G -f 2 -g 4")
    doc = run.facts_by_host["node1"]
    assert doc["collectors"]["nccl_all_reduce"]["status"] == "ok"
    assert doc["perf"]["nccl_all_reduce"]["busbw_gbps"] == 482.12
    assert ("nccl_all_reduce", "busbw", 482.12, "GB/s") in [(f.probe, f.name, f.value, f.unit) for f in run.figures()]
    assert (node["run"] / doc["collectors"]["nccl_all_reduce"]["evidence"]).is_file()
    assert [(e.probe, e.stage, e.subject, e.status) for e in events] == [("nccl_all_reduce", "node", "node1", "ok")]


def test_a_busy_node_is_skipped_and_the_probe_never_starts(node):
    run, events = probe(node, GPU_APPS="4242, python3, 30512 MiB")
    run_record = run.facts_by_host["node1"]["collectors"]["nccl_all_reduce"]
    assert run_record["status"] == "skipped"
    assert "1 GPU compute process(es) running" in run_record["error"] and "4242" in run_record["error"]
    assert not node["argv"].exists()
    assert events[0].status == "skipped"


def test_require_idle_makes_a_busy_node_an_error(node):
    run, _ = probe(node, settings=ProbeSettings(require_idle=True), GPU_APPS="4242, python3, 30512 MiB")
    run_record = run.facts_by_host["node1"]["collectors"]["nccl_all_reduce"]
    assert run_record["status"] == "error" and run_record["error"].startswith("--require-idle: ")


def test_probes_not_started_within_the_budget_are_recorded_as_not_run(node):
    run, _ = probe(node, ("nccl_all_reduce", "nccl_all_gather"), ProbeSettings(budget_s=7), SLEEP="3")
    got = run.facts_by_host["node1"]["collectors"]
    assert got["nccl_all_reduce"]["status"] == "ok"
    assert got["nccl_all_gather"]["status"] == "skipped"
    assert "budget" in got["nccl_all_gather"]["error"]
    assert run.stopped == "budget"
    assert "all_gather_perf" not in node["argv"].read_text()


def test_a_running_probe_is_stopped_at_the_budget(node):
    t0 = time.monotonic()
    run, _ = probe(node, settings=ProbeSettings(budget_s=8), SLEEP="300")
    assert time.monotonic() - t0 < 90
    got = run.facts_by_host["node1"]["collectors"]["nccl_all_reduce"]
    assert got["status"] == "error" and "timed out" in got["error"]


def test_probe_names_and_settings_are_checked_before_anything_runs(node):
    assert select_probes(["ib_pair_bw,nccl_all_reduce"]) == ("nccl_all_reduce", "ib_pair_bw")
    with pytest.raises(InputError, match="unknown probe 'nccl_allreduce'"):
        select_probes(["nccl_allreduce"])
    with pytest.raises(InputError, match="--probe-budget must be positive"):
        probe(node, settings=ProbeSettings(budget_s=0))
    assert not node["run"].exists()
    with pytest.raises(InputError, match="reaches one host at a time"):
        run_probes([Host("n")], node["run"], ["nccl_all_reduce"], values=lambda h: {}, via="ansible",
                   options=None)


def _baseline(tmp_path: Path, node: dict) -> Path:
    import yaml

    path = tmp_path / "baseline.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "fabricproof/v1", "kind": "Baseline", "metadata": {"name": "t"},
                                    "spec": {"defaults": {**node["values"],
                                                          "perf": {**node["values"]["perf"],
                                                                   "nccl": {"all_reduce_busbw_gbps": 460}}}}}))
    return path


def test_check_local_runs_the_probe_on_this_node_and_judges_its_figure(node, tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from fabricproof.cli import app

    monkeypatch.setenv("PATH", node["env"]["PATH"])
    result = CliRunner().invoke(app, ["check", "--local", "-b", str(_baseline(tmp_path, node)), "--node-name", "node1",
                                      "--probes", "nccl_all_reduce", "-c", "perf.nccl_allreduce_busbw", "-f", "json",
                                      "--run-dir", str(node["run"])])
    report = json.loads(result.stdout)
    (r,) = [r for r in report["results"] if r["check_id"] == "perf.nccl_allreduce_busbw"]
    assert r["outcome"] == "pass", r
    assert {"host": "node1", "probe": "nccl_all_reduce", "target": "", "figure": "busbw", "value": 482.12,
            "unit": "GB/s", "higher_is_better": True} in report["figures"]
    from fabricproof.reporters.json_report import report_from_json, validate_document

    validate_document(report)
    assert report_from_json(result.stdout).figures == tuple(report["figures"])
    assert (node["run"] / "probes" / "raw" / "node1" / "nccl_all_reduce.txt").is_file()
    facts = json.loads((node["run"] / "facts" / "node1.json").read_text())
    assert facts["collectors"]["nccl_all_reduce"]["evidence"] == "probes/raw/node1/nccl_all_reduce.txt"


def test_check_local_refuses_a_pairwise_probe(node, tmp_path):
    from typer.testing import CliRunner

    from fabricproof.cli import app

    result = CliRunner().invoke(app, ["check", "--local", "-b", str(_baseline(tmp_path, node)), "--probes",
                                      "ib_pair_bw"])
    assert result.exit_code == 2 and "needs two hosts" in result.output
