"""A real Slurm whose nodes are lab nodes: one GB200 rack of the lab behind real sshd, and a test cluster of Debian's
munged, slurmctld and one slurmd per lab node (same names) whose HealthCheckProgram is fabricproof."""

from __future__ import annotations

import fcntl
import re
import shlex
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import slurmkit
from fabricproof import fsutil
from fabricproof_lab import manager
from labkit import LabFactory, RunningLab

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "inventories" / "lab" / "baseline.yaml"
NODES = ("gb200-0001", "gb200-0002", "gb200-0003")

# Makes a process the lab node Slurm runs it on ($SLURMD_NODENAME: slurmd sets it for health checks and job
# tasks): that node's emulated tools, state and fake root, as if each Slurm node were its own GPU machine. The
# real scontrol goes ahead of the lab's emulated one; the package is this checkout's. The emulated probes answer at
# once (no test here reads how long a probe lasts: its figure is the same), unless the launch's environment asks
# for their scaled real duration (FABRICPROOF_LAB_PROBE_SCALE=1: a step long enough to interrupt).
AS_LAB_NODE = """\
#!/bin/sh
node={nodes}/"$SLURMD_NODENAME"
[ -n "$SLURMD_NODENAME" ] && [ -d "$node" ] || {{ echo "as-lab-node: no lab node '$SLURMD_NODENAME'" >&2; exit 2; }}
PATH={slurm_bin}:{lab_bin}:/usr/sbin:/usr/bin:/sbin:/bin
FABRICPROOF_LAB_PROBE_SCALE=${{FABRICPROOF_LAB_PROBE_SCALE:-0}}
export PATH SLURM_CONF={conf} PYTHONPATH={cli} FABRICPROOF_LAB_NODE="$node" FABRICPROOF_HOST_ROOT="$node/root"
export FABRICPROOF_LAB_PROBE_SCALE
exec "$@"
"""

# slurmd's HealthCheckProgram here: the shipped wrapper (deploy/slurm/fabricproof-health), run unchanged, its
# settings given as the environment variables it reads (on a real node slurmd passes none: its defaults hold), its
# `fabricproof` the lab node's; around it a lock of the test's own (a run skipped because the last one still goes
# records nothing), the runs a test still allows the node (health-allow-<node>, if there is one: a test that needs n
# rounds pays for n, not for every tick while it waits) and a line per finished run (node, start time, exit status)
# so that tests can wait for a run that began after a change. --command-timeout 20: ten nodes' collections share two
# loaded cores. Its state directory is the cluster's (slurmd gives a health check no environment of the test's, and
# the machine's /var/lib/fabricproof is no test's to write): with no HOME, the inventory's cache is kept there too.
# Ansible logs each ansible-inventory run to health-ansible.log (its answer, under a "p=<pid> ... INFO| {" line).
HEALTH = """\
#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
exec 9>>{root}/health-"$SLURMD_NODENAME".lock
flock -n 9 || exit 0
allow={root}/health-allow-"$SLURMD_NODENAME"
if [ -f "$allow" ]; then
    left=$(cat "$allow")
    [ "$left" -gt 0 ] || exit 0
    echo $((left - 1)) > "$allow"
fi
start=$(date +%s.%N)
FABRICPROOF_ETC={etc} FABRICPROOF_FACTS_DIR={root}/health-facts FABRICPROOF_COMMAND_TIMEOUT=20 \\
    FABRICPROOF_STATE_DIR={root}/state FABRICPROOF_LOCK={root}/health-"$SLURMD_NODENAME".inner.lock FABRICPROOF_PATH={bin}:/usr/sbin:/usr/bin:/sbin:/bin \\
    ANSIBLE_LOG_PATH={root}/health-ansible.log \\
    {program}
echo "$SLURMD_NODENAME $start $?" >> {root}/health-runs.log
"""
# The `fabricproof` the wrapper finds first on its PATH: this checkout's package, run as the lab node.
FABRICPROOF = """\
#!/bin/sh
exec {as_lab_node} {python} -m fabricproof "$@"
"""
HEALTH_INTERVAL_S = 3  # a real cluster checks every few minutes; the tests want several runs in seconds


@dataclass(frozen=True)
class SlurmLab:
    lab: RunningLab
    cluster: slurmkit.SlurmCluster
    as_lab_node: Path

    @property
    def inventory(self) -> Path:
        return self.lab.dir / "inventory.yml"

    @property
    def health_runs(self) -> Path:
        return self.cluster.root / "health-runs.log"

    def inventory_runs(self) -> int:
        """How many times the health checks so far ran ansible-inventory (read the inventory other than from the
        cache)."""
        try:
            text = (self.cluster.root / "health-ansible.log").read_text()
        except FileNotFoundError:
            return 0
        return len(re.findall(r"^\S+ \S+ p=\d+ u=\S+ n=ansible INFO\| \{$", text, re.M))

    def checked_since(self, node: str, since: float) -> bool:
        """True once a health check of `node` that started after `since` (time.time()) has finished."""
        try:
            lines = self.health_runs.read_text().splitlines()
        except OSError:
            return False
        return any(f[0] == node and float(f[1]) > since for f in map(str.split, lines) if len(f) == 3)

    def health_checks(self, on: bool, rounds: int | None = None) -> None:
        """Start health checks every HEALTH_INTERVAL_S (`rounds`: only that many runs a node, see health_rounds), or
        stop them and wait for any still running to end."""
        if on:
            self.health_rounds(rounds)
        self.cluster.reconfigure(HEALTH_INTERVAL_S if on else 0)
        if on:
            return
        for node in self.cluster.nodes:
            with (self.cluster.root / f"health-{node}.lock").open("a") as lock:
                slurmkit.wait_for(lambda: _try_lock(lock.fileno()), 120.0, f"{node}'s running health check to end")

    def health_rounds(self, rounds: int | None) -> None:
        """Let every node run `rounds` more health checks (slurmd's ticks past them do nothing); None: no limit."""
        for node in self.cluster.nodes:
            allow = self.cluster.root / f"health-allow-{node}"
            if rounds is None:
                allow.unlink(missing_ok=True)
            else:
                fsutil.atomic_write_text(allow, f"{rounds}\n")  # a wrapper never reads it half written

    def give_nodes_back(self) -> None:
        """Clear every fault and hand the nodes' directories back to the lab user (root ran their tools)."""
        for node in self.cluster.nodes:
            manager.fault_clear(self.lab.dir, node)


def _try_lock(fd: int) -> bool:
    """Take and at once release the lock a health check holds while it runs; False while one runs."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def start(lab_factory: LabFactory, nodes: int = len(NODES), baseline: Path = BASELINE, fabric: bool = False
          ) -> SlurmLab:
    """The lab rack of `nodes` trays (on the lab's InfiniBand fabric with `fabric`), then the cluster on it (its
    scripts written first, the health check judging `baseline`); the caller stops the cluster."""
    directory = lab_factory.new_dir()
    status = lab_factory.up(directory, nodes=nodes, profile="gb200-nvl72", fabric=fabric)
    assert status.running, status.as_dict()
    lab = RunningLab(dir=directory, status=status)

    cluster = slurmkit.SlurmCluster(nodes=tuple(f"gb200-{i:04d}" for i in range(1, nodes + 1)))
    root = cluster.root
    slurm_bin = root / "slurm-bin"
    slurm_bin.mkdir()
    (slurm_bin / "scontrol").symlink_to(shutil.which("scontrol"))
    q = lambda p: shlex.quote(str(p))  # noqa: E731 - every path goes into the scripts quoted
    as_lab_node = _script(root / "as-lab-node", AS_LAB_NODE.format(
        nodes=q(directory / "nodes" / "by-name"), slurm_bin=q(slurm_bin), lab_bin=q(directory / "bin"),
        conf=q(cluster.conf), cli=q(REPO / "cli")))
    etc, bin_dir = root / "etc", root / "bin"  # the node's /etc/fabricproof and /usr/local/bin
    etc.mkdir()
    bin_dir.mkdir()
    shutil.copyfile(baseline, etc / "baseline.yaml")
    shutil.copyfile(directory / "inventory.yml", etc / "inventory.yml")
    _script(bin_dir / "fabricproof", FABRICPROOF.format(as_lab_node=q(as_lab_node), python=q(sys.executable)))
    cluster.health = _script(root / "health-check", HEALTH.format(
        root=q(root), etc=q(etc), bin=q(bin_dir), program=q(slurmkit.HEALTH_PROGRAM)))
    cluster.start()
    return SlurmLab(lab, cluster, as_lab_node)


@contextmanager
def running(lab_factory: LabFactory, nodes: int = len(NODES), baseline: Path = BASELINE, fabric: bool = False,
            health: bool = True) -> Iterator[SlurmLab]:
    """A module's Slurm lab (`start`), skipped where Slurm cannot run here (or flock, for `health` checks), always
    stopped by PID: what the stop met fails the module."""
    reason = slurmkit.skip_reason()
    if not reason and health and not shutil.which("flock"):
        reason = "flock (util-linux) is missing"
    if reason:
        pytest.skip(reason)
    sl = start(lab_factory, nodes=nodes, baseline=baseline, fabric=fabric)
    try:
        yield sl
    finally:
        problems = sl.cluster.stop()
        assert not problems, problems
