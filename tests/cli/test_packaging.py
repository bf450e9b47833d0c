"""A plain `pip install .` ships the catalog, schemas, playbooks and example inventories inside the wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("fabricproof-*.whl")
    return whl


def test_wheel_carries_data_and_console_script(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for tracked in ("checks/nvlink/nvlink.links_active.yaml", "schemas/baseline.schema.json", "schemas/facts.schema.json",
                    "inventories/dgx-h100/baseline.yaml"):
        assert f"fabricproof/_data/{tracked}" in names, tracked
    n_checks = sum(1 for n in names if n.startswith("fabricproof/_data/checks/") and n.endswith(".yaml"))
    assert n_checks == len(list((REPO / "checks").rglob("*.yaml")))
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "fabricproof = fabricproof.__main__:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_cli_works_from_any_directory(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-m", "fabricproof", "checks", "list", "--format", "json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == len(list((REPO / "checks").rglob("*.yaml")))
    where = subprocess.run([sys.executable, "-c", "from fabricproof.paths import data_root; print(data_root())"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(site / "fabricproof" / "_data")


def test_ci_runs_the_readmes_test_command_verbatim():
    """CI installs what the README's test command installs and runs what it runs: the two cannot drift apart."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("apt-get update") and "pytest" in line]
    assert len(commands) == 1, commands
    assert commands[0] in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
