"""Fixtures for the emulated-node tests: a lab dir with the tools installed, nodes, and a tool runner.

No sshd here: tools run as subprocesses with the environment an SSH session gets (PATH with the lab's bin
first, FABRICPROOF_LAB_NODE naming the node) under /usr/bin/python3, as the lab user would run them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from fabricproof_lab.emu import api

SYSTEM_PYTHON = Path("/usr/bin/python3")
PROFILES = ("dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72")


class Node:
    """One emulated node of a test lab, and a way to run its tools."""

    def __init__(self, lab: Path, address: str) -> None:
        self.lab, self.address = lab, address
        self.dir = api.node_path(lab, address)

    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.lab}/bin:/usr/bin:/bin", "FABRICPROOF_LAB_NODE": str(self.dir),
                "FABRICPROOF_HOST_ROOT": str(self.dir / "root"), "LANG": "C.UTF-8"}

    def run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a tool (or `sh -c SCRIPT`) on the node, as a collector or a playbook task would."""
        return subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=timeout,
                              errors="surrogateescape")

    def state(self) -> dict:
        return api.read_node(self.lab, self.address)

    def view(self) -> dict:
        return api.view_node(self.lab, self.address)


@pytest.fixture(scope="session")
def system_python() -> Path:
    if not SYSTEM_PYTHON.exists():
        pytest.skip("/usr/bin/python3 (the interpreter lab tools run under) is not installed")
    return SYSTEM_PYTHON


@pytest.fixture
def lab(tmp_path: Path, system_python: Path) -> Path:
    """A lab dir with the package and tool scripts installed (no nodes yet)."""
    root = tmp_path / "lab"
    api.install(root)
    return root


@pytest.fixture
def make_node(lab: Path) -> Callable[..., Node]:
    """make_node(profile, index=1, rack=None) -> a fresh healthy node in the test lab."""
    count = {"n": 0}

    def make(profile: str, index: int | None = None, rack: int | None = None,
             peers: list[str] | None = None) -> Node:
        count["n"] += 1
        address = f"127.10.0.{count['n']}"
        idx = count["n"] if index is None else index
        if rack is None and profile == "gb200-nvl72":
            rack = 1
        api.create_node(lab, address, profile, idx, rack, f"{profile.split('-')[1]}-{idx:04d}", peers=peers)
        return Node(lab, address)

    return make


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest) -> str:
    return request.param
