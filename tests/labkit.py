"""Real labs for tests: start them with real sshd in throwaway dirs, and always stop them by PID (shared by the
lab, transport, rollout and fault-matrix suites)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fabricproof_lab import manager, nodestore, procs, sshd
from fabricproof_lab import state as lab_state
from fabricproof_lab.fabric import sim
from fabricproof_lab.fabric.sim import FabricState


def lab_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "lab tests need root: they create the lab user and run sshd"
    if not os.access(sshd.SSHD, os.X_OK):
        return f"{sshd.SSHD} is missing; install it with: {sshd.INSTALL_HINT}"
    return None


def _lab_tmpdir() -> Path:
    # Not pytest's tmp_path: /tmp/pytest-of-root is 0700 and the lab user must traverse the lab dir.
    path = Path(tempfile.mkdtemp(prefix="fabricproof-lab-test-", dir="/tmp"))
    path.chmod(0o711)
    return path


@dataclass
class LabFactory:
    """Starts labs and remembers every sshd PID any of them ever had, so teardown misses none."""

    roots: list[Path] = field(default_factory=list)
    pids: dict[int, str] = field(default_factory=dict)  # pid -> its sshd config path
    sim_pids: dict[int, str] = field(default_factory=dict)  # pid of an ibsim or opensm -> its fabric dir

    def new_dir(self) -> Path:
        root = _lab_tmpdir()
        self.roots.append(root)
        return root / "lab"

    def up(self, directory: Path, nodes: int, profile: str, port: int | None = None,
           node_store: str = "auto", latency_profile: str = "off", fabric: bool = False) -> manager.LabStatus:
        try:
            return manager.up(directory, nodes, profile, port, node_store=node_store, latency_profile=latency_profile,
                              fabric=fabric)
        finally:
            self.track(directory)

    def track(self, directory: Path) -> None:
        lab = lab_state.load(directory / "lab.json")
        for g in lab.sshd if lab else []:
            if g.pid is not None:
                self.pids[g.pid] = g.config
        fabric = FabricState.from_dict(lab.fabric) if lab and lab.fabric else None
        for pid in fabric.pids() if fabric else []:
            self.sim_pids[pid] = fabric.dir

    def down(self, roots: list[Path]) -> list[str]:
        """Stop and remove these labs now, by PID (a test's own labs, at its end: left for the session's teardown
        they all stop at once on the last test, a serial tail of the run); returns the problems."""
        problems: list[str] = []
        for root in [r for r in roots if r in self.roots]:  # not twice: the session's teardown may have come first
            lab_dir = root / "lab"
            try:
                self.track(lab_dir)
                if (lab_dir / "lab.json").exists():
                    manager.down(lab_dir, purge=True)  # purge frees the tmpfs node store too
                else:  # an `up` refused early: no sshd, but maybe a node store
                    nodestore.remove_nodes(lab_dir / "nodes")
            except Exception as exc:  # noqa: BLE001 - keep going: every lab must be stopped
                problems.append(f"lab down {lab_dir}: {exc}")
            else:
                shutil.rmtree(root, ignore_errors=True)
                self.roots.remove(root)
        return problems

    def teardown(self) -> list[str]:
        problems = self.down(list(self.roots))
        for pid, config in self.pids.items():
            if sshd.is_lab_sshd(pid, Path(config)):
                problems.append(f"sshd {pid} ({config}) outlived lab down; killing it")
                left = procs.freeze_tree([pid])
                for p in left:
                    os.kill(p, signal.SIGKILL)
                procs.terminate(left, timeout_s=2)
        for pid, fabric_dir in self.sim_pids.items():
            if any(procs.is_process_of(pid, exe, fabric_dir) for exe in (sim.IBSIM, sim.OPENSM)):
                problems.append(f"fabric simulator {pid} ({fabric_dir}) outlived lab down; killing it")
                procs.terminate([pid], timeout_s=2)
        for root in self.roots:
            shutil.rmtree(root, ignore_errors=True)
        return problems


def connect_node(lab_dir: Path, name: str, timeout_s: float = 60.0):
    """A paramiko client logged in to the lab node `name` (its inventory name) as the lab user, host key checked
    against the lab's known_hosts."""
    import paramiko

    from fabricproof.inventory import load as load_inventory
    from fabricproof_lab.user import LAB_USER

    host = load_inventory(str(lab_dir / "inventory.yml")).hosts[name]
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab_dir / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(host.vars["ansible_host"], port=int(host.vars["ansible_port"]), username=LAB_USER,
                   key_filename=str(lab_dir / "keys" / "id_ed25519"), look_for_keys=False, allow_agent=False,
                   timeout=timeout_s)
    return client


@dataclass(frozen=True)
class RunningLab:
    dir: Path
    status: manager.LabStatus

    @property
    def lab(self) -> lab_state.LabState:
        assert self.status.lab is not None
        return self.status.lab


#: The inventory groups the lab baseline (inventories/lab/baseline.yaml) sets values for. An ad-hoc test inventory
#: judged against that baseline declares them, empty, as the lab's own inventory does; a baseline group the
#: inventory lacks is refused (issue 19.1).
LAB_BASELINE_GROUPS = ("dgx_a100", "dgx_h100", "hgx_h200", "gb200_nvl72")


def lab_baseline_children() -> str:
    """YAML to put under `all:` of a test inventory: the lab baseline's groups, without hosts."""
    return "  children:\n" + "".join(f"    {g}: {{}}\n" for g in LAB_BASELINE_GROUPS)
