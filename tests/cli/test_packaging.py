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


#: sha256 of the Apache License 2.0 as the ASF publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_license_file_is_the_declared_licence_and_ships_in_the_wheel(wheel):
    import hashlib
    import tomllib

    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    assert hashlib.sha256((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256
    names = zipfile.ZipFile(wheel).namelist()
    (shipped,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert zipfile.ZipFile(wheel).read(shipped) == (REPO / "LICENSE").read_bytes()


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


def test_a_pip_user_starts_with_init_outside_the_repository(wheel, tmp_path):
    """`init` from the installed wheel in a directory that is not the repository: the starter files lint and plan,
    and in that directory every command finds its baseline and inventory through fabricproof.yaml."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # A pip user's environment: none of this checkout's FABRICPROOF_* settings, but the test's own state directory
    # (validate keeps the checked catalog there, which would otherwise be this machine's /var/lib/fabricproof).
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRICPROOF_")} | {
        "PYTHONPATH": str(site), "FABRICPROOF_STATE_DIR": str(tmp_path / "state")}
    work = tmp_path / "ops"
    work.mkdir()

    def fp(*args: str, cwd: Path = work) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fabricproof", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=300)

    made = fp("init", "--platform", "dgx-h100", "fabric")
    assert made.returncode == 0, made.stderr
    fabric = work / "fabric"
    for name in ("fabricproof.yaml", "inventory.yml", "baseline.yaml", "plans/hca-firmware.yml",
                 "runbooks/isolate-failing-nodes.yml", ".schemas/baseline.schema.json"):
        assert (fabric / name).is_file(), name
    assert (fabric / "baseline.yaml").read_text().startswith("# yaml-language-server: $schema=.schemas/baseline.")
    assert (fabric / "plans/hca-firmware.yml").read_text().startswith(
        "# yaml-language-server: $schema=../.schemas/rollout.schema.json\n")
    assert "CHANGE ME" in (fabric / "inventory.yml").read_text()
    assert not list(fabric.rglob("*.tmp"))

    shown = fp("config", "-f", "json", cwd=fabric)
    assert shown.returncode == 0, shown.stderr
    settings = json.loads(shown.stdout)["settings"]
    assert settings["baseline"] == {"value": "baseline.yaml", "source": "fabricproof.yaml:4"}
    assert settings["inventory"]["value"] == "inventory.yml"
    for args in (("baseline", "lint", "baseline.yaml"), ("runbook", "lint", "runbooks/isolate-failing-nodes.yml"),
                 ("rollout", "plan", "plans/hca-firmware.yml")):
        res = fp(*args, cwd=fabric)
        assert res.returncode == 0, (args, res.stdout, res.stderr)

    # No -b, no -i: the merged baseline node-0001 gets from the config's inventory, with each value's source.
    res = fp("baseline", "show", "--host", "node-0001", "-f", "json", cwd=fabric)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["groups"] == ["dgx_h100"] and doc["values"]["gpu"]["count"] == 8
    assert doc["sources"]["gpu.count"] == "defaults"
    # validate takes the config's baseline and inventory too: node-0001's facts judged, node-0002 (no facts) not
    # collected.
    facts = tmp_path / "facts"
    facts.mkdir()
    shipped = json.loads((site / "fabricproof/_data/inventories/lab/facts/h100-0001.json").read_text())
    (facts / "node-0001.json").write_text(json.dumps({**shipped, "host": "node-0001"}))
    res = fp("validate", "--facts", str(facts), "-f", "json", cwd=fabric)
    report = json.loads(res.stdout)
    assert res.returncode == 3 and report["hosts"] == ["node-0001", "node-0002"], res.stderr
    assert "node-0002" in report["collection_errors"] and report["summary"]["passed"] > 0

    again = fp("init", "fabric")
    assert again.returncode == 2 and "already holds fabricproof.yaml" in again.stderr
