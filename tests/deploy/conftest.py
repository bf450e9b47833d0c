"""An emulated GPU node to run the shipped deploy/ scripts on (no sshd: its tools first on PATH, as
`check --local` finds them on a real node), and a `fabricproof` on PATH that is this checkout's package."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from labkit import LAB_BASELINE_GROUPS
from fabricproof_lab.emu import api

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "inventories" / "lab" / "baseline.yaml"
NODE, ADDRESS = "h100-0001", "127.10.0.1"


@dataclass(frozen=True)
class LabNode:
    lab: Path
    bin: Path  # holds `fabricproof`
    inventory: Path

    @property
    def dir(self) -> Path:
        return api.node_path(self.lab, ADDRESS)

    def env(self, **extra: str) -> dict[str, str]:
        """The node's environment: its emulated tools and fake root, fabricproof on PATH, nothing of this machine's
        Slurm (SLURMD_NODENAME names the node, as slurmd would), and the test's own state directory: `check --local`
        keeps the checked catalog there, which would otherwise be this machine's /var/lib/fabricproof."""
        return {"PATH": f"{self.bin}:{self.lab}/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                "FABRICPROOF_LAB_NODE": str(self.dir), "FABRICPROOF_HOST_ROOT": str(self.dir / "root"),
                "PYTHONPATH": str(REPO / "cli"), "SLURMD_NODENAME": NODE,
                "FABRICPROOF_STATE_DIR": os.environ["FABRICPROOF_STATE_DIR"], **extra}

    def fault(self, name: str) -> None:
        api.inject(self.lab, ADDRESS, name)


@pytest.fixture
def lab_node(tmp_path: Path) -> LabNode:
    if not Path("/usr/bin/python3").exists():
        pytest.skip("/usr/bin/python3 (the interpreter lab tools run under) is not installed")
    lab = tmp_path / "lab"
    api.install(lab)
    api.create_node(lab, ADDRESS, "dgx-h100", 1, None, NODE)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "fabricproof"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} -m fabricproof "$@"\n')
    exe.chmod(0o755)
    inventory = tmp_path / "inventory.yml"
    groups = {g: {} for g in LAB_BASELINE_GROUPS}  # the lab baseline's: a group it sets the inventory lacks is refused
    inventory.write_text(yaml.safe_dump({"all": {"children": {**groups, "dgx_h100": {"hosts": {NODE: None}}}}}))
    return LabNode(lab, bin_dir, inventory)
