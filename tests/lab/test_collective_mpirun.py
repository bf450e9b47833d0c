"""Multi-node collectives through real Open MPI (issue 22.1): Debian's mpirun starts the real orted on each lab node
over the lab's sshd (the baseline's rsh_agent: ssh with the lab's ssh_config, strict host keys), each orted starts
the emulated nccl-tests as its node, the tasks meet over loopback and rank 0 prints the multi-node format; the host
file holds the inventory's names; Ctrl-C and the timeout leave no orted and no task behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fabricproof import inventory
from fabricproof.probes import collective
from fabricproof_lab import manager
from labkit import LabFactory
from slurmkit import Interrupted, wait_for

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
HOSTS = [f"gb200-{i:04d}" for i in range(1, 5)]
WAIT_S = 120.0
# Lab figures (emu/multinode): one rack's NVLink domain ~833 GB/s avg busbw; its InfiniBand alone (MNNVL off) 4 x NDR
# 400 per tray ~165, one HCA at half ~145; a tray whose NVLink carries half halves the domain's figure.
THRESHOLDS = {"domain_ib": 155.0, "all": 745.53}
# mpirun refuses root unless told twice; the lab tests run as root (sshd, the lab user)
AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# Open MPI's own way to hand a variable to every task (mca_base_env_list): the emulated run lasts its real
# duration, capped at 15 s, long enough to interrupt
LONG_RUN = {"OMPI_MCA_mca_base_env_list": "FABRICPROOF_LAB_PROBE_SCALE=1"}


@pytest.fixture(scope="module")
def rack(lab_factory: LabFactory) -> Iterator[Path]:
    if not shutil.which("mpirun") or not shutil.which("orted"):
        pytest.skip("Open MPI's mpirun is missing: apt-get install -y openmpi-bin")
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=len(HOSTS), profile="gb200-nvl72")
    assert status.running, status.as_dict()
    yield directory
    problems = lab_factory.down([directory.parent])
    assert not problems, problems


def values(lab: Path, **over: object) -> dict:
    c = {"launcher": "mpirun", "rsh_agent": f"ssh -F {lab / 'ssh_config'}", "tasks_per_node": "one",
         "thresholds": THRESHOLDS, "timeout_s": 120, **over}
    return {"gpu": {"count": 4}, "perf": {"probes": {"nccl_tests": {"bin_dir": str(lab / "bin")}, "collective": c}}}


def env(**over: str) -> dict[str, str]:
    return {**os.environ, **AS_ROOT, "PYTHONPATH": str(REPO / "cli"), **over}


def collective_run(lab: Path, tmp_path: Path, *args: str) -> list[str]:
    """`fabricproof collective run --via mpirun` as an operator types it, with a baseline naming the agent (its
    launcher srun: --via decides)."""
    base = tmp_path / "baseline.yaml"
    defaults = values(lab)
    defaults["perf"]["probes"]["collective"]["launcher"] = "srun"
    base.write_text(yaml.safe_dump({"apiVersion": "fabricproof/v1", "kind": "Baseline", "metadata": {"name": "t"},
                                    "spec": {"defaults": defaults}}))
    return [sys.executable, "-m", "fabricproof", "collective", "run", "-i", str(lab / "inventory.yml"), "-b",
            str(base), "--via", "mpirun", "-o", str(tmp_path / "run"), *args]


def left(lab: Path) -> list[str]:
    """orted daemons and emulated nccl-tests tasks running as a node of this lab (ps, then each one's environment:
    sshd gave the node's identity to the session orted runs in)."""
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    found = []
    for line in ps.splitlines():
        pid, _, args = line.strip().partition(" ")
        if not (args.startswith("orted ") or "_perf" in args):
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if f"FABRICPROOF_LAB_NODE={lab}/nodes/".encode() in environ:
            found.append(line)
    return found


def gone(lab: Path) -> None:
    """ps: no orted and no task left on any node. Bounded wait, not at once: mpirun has no squeue to ask, and an
    orted whose ssh had reached sshd when mpirun ended may still start; finding no mpirun, it exits by itself (well
    under a second here)."""
    wait_for(lambda: not left(lab), WAIT_S, "every orted and task of the cancelled launch to end",
             lambda: "\n".join(left(lab)))


def kind(line: str) -> str:
    return "orted" if line.split(None, 1)[1].startswith("orted ") else "task"


def test_a_collective_through_mpirun_runs_on_each_node_and_a_faulty_one_lowers_its_figure(rack, tmp_path):
    names = list(inventory.load(str(rack / "inventory.yml")).hosts)
    assert names == HOSTS
    run = collective.Collective(values(rack), "all", tmp_path / "all", env=env())
    (domain,) = run([names])
    ib_run = collective.Collective(values(rack), "domain_ib", tmp_path / "ib", env=env())
    (ib,) = ib_run([names])
    assert domain.failure is None and ib.failure is None, (domain, ib)
    # one NVLink domain: the rack's figure; -x NCCL_MNNVL_ENABLE=0 reached every task: the trays' InfiniBand alone
    assert domain.figure > THRESHOLDS["all"] * 1.05 and THRESHOLDS["domain_ib"] * 1.05 < ib.figure < 200
    (launch,) = run.launches
    # the host file: the inventory's names, one slot each; the agent and every value one argv element
    hostfile = Path(launch.argv[launch.argv.index("--hostfile") + 1])
    assert hostfile.read_text() == "".join(f"{h} slots=1\n" for h in names)
    assert launch.argv == collective.mpirun_argv(values(rack), names, hostfile)
    assert launch.argv[launch.argv.index("plm_rsh_agent") + 1] == f"ssh -F {rack / 'ssh_config'}"
    # each node's own task took part: its rank lines name its host, each with its 4 GPUs
    assert launch.parsed["hosts"] == names and launch.parsed["ranks"] == 16
    assert [p["devices"] for p in launch.parsed["participants"]] == [[0, 1, 2, 3]] * 4
    # --tag-output's prefix on the tool's lines; mpirun's own warnings may come first, untagged (plm:rsh's benign
    # "setpgid(...) failed in parent" when an agent has already exec'd, seen under load)
    tagged = [line for line in launch.evidence.read_text().splitlines() if "]<stdout>:" in line]
    assert tagged[0].startswith("[1,0]<stdout>:# nccl-tests version"), tagged[:3]
    assert ib_run.launches[0].argv[11:13] == ("-x", "NCCL_MNNVL_ENABLE=0")

    manager.fault_inject(rack, "gb200-0003", "hca-degraded")
    try:
        (slow,) = collective.Collective(values(rack), "domain_ib", tmp_path / "slow", env=env())([names])
    finally:
        manager.fault_clear(rack, "gb200-0003")
    assert slow.failure is None and slow.figure < THRESHOLDS["domain_ib"] < ib.figure, (slow, ib)
    assert not left(rack)


def test_ctrl_c_and_the_timeout_end_mpirun_and_leave_no_orted_and_no_task(rack, tmp_path):
    """The operator's Ctrl-C on `fabricproof collective run --via mpirun` once every node runs its orted and its
    task: exit 130, nothing left; then a launch past its timeout."""
    ev = tmp_path / "run" / "probes" / "collective"
    with Interrupted(collective_run(rack, tmp_path, "--scale", "all"), env(**LONG_RUN)) as interrupted:
        child = interrupted.proc
        wait_for(lambda: sorted(kind(p) for p in left(rack)) == ["orted"] * 4 + ["task"] * 4, WAIT_S,
                 "an orted and a task on each of the four nodes", lambda: "\n".join(left(rack)))
        # mpirun itself runs the argv as built, without a shell between
        mpirun = subprocess.run(["pgrep", "-P", str(child.pid), "-x", "mpirun"], capture_output=True, text=True)
        cmdline = Path(f"/proc/{mpirun.stdout.split()[0]}/cmdline").read_bytes().split(b"\0")[:-1]
        assert [a.decode() for a in cmdline] == list(collective.mpirun_argv(values(rack), HOSTS, ev / "0000.hosts"))
        _out, err = interrupted.ctrl_c(WAIT_S)
    assert child.returncode == 130, err
    gone(rack)

    run = collective.Collective(values(rack, timeout_s=3), "all", tmp_path / "t", env=env(**LONG_RUN))
    (out,) = run([HOSTS])
    assert out.kind == "timeout" and "cancelled" in out.failure
    assert run.launches[0].proc.poll() is not None
    gone(rack)


def test_the_collective_command_via_mpirun_searches_and_judges_the_tray_at_fault(rack, tmp_path):
    """`fabricproof collective run --via mpirun --search` as an operator types it (the baseline names the agent):
    every group an mpirun launch over the inventory's names, the search names the tray whose NVLink carries half,
    its facts fail perf.collective_at_fault on it alone (exit 1)."""
    manager.fault_inject(rack, "gb200-0002", "nvlink-degraded")
    try:
        proc = subprocess.run(collective_run(rack, tmp_path, "--scale", "all", "--search", "-f",
                                             f"json={tmp_path / 'report.json'}"),
                              env=env(), capture_output=True, text=True, timeout=900)
    finally:
        manager.fault_clear(rack, "gb200-0002")
    assert proc.returncode == 1, proc.stderr
    assert "round 1: 1 group(s) at once (all)" in proc.stderr and "search: at fault" in proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    failed = {(r["check_id"], r["host"]) for r in report["results"] if r["outcome"] == "fail"}
    assert {h for c, h in failed if c == "perf.collective_at_fault"} == {"gb200-0002"}
    path = json.loads((tmp_path / "run" / "collective.json").read_text())
    assert path["launcher"] == "mpirun" and path["search"]["hosts"] == ["gb200-0002"]
    assert all(la["argv"][0] == "mpirun" and la["figure"] is not None for la in path["launches"]), path["launches"]
    assert path["launches"][0]["hosts"] == HOSTS
    assert not left(rack)
