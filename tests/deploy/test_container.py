"""deploy/container/Containerfile: no image can be built here (its base images come from registries this machine
cannot reach), so what can be checked is: it parses (dockerfile-parse), installs the package from this repository
with pip, runs the CLI as its entry point, installs the DaemonSet's script, and its Debian packages exist."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "deploy" / "container" / "Containerfile"


def _instructions() -> list[tuple[str, str]]:
    parsed = DockerfileParser(fileobj=CONTAINERFILE.open("rb"))
    return [(i["instruction"], i["value"]) for i in parsed.structure if i["instruction"] != "COMMENT"]


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions()
    last = max(n for n, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last:]


def test_the_image_installs_this_repository_and_runs_the_cli():
    stage = _final_stage()
    assert stage[0][1].startswith("docker.io/library/python:3.1")  # requires-python >= 3.11
    copies = [v for op, v in stage if op == "COPY"]
    assert ". /src/fabricproof" in copies  # the build context is the repository's top
    runs = " ".join(v for op, v in stage if op == "RUN")
    assert "python -m pip install --no-cache-dir /src/fabricproof" in runs
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    (entrypoint,) = [v for op, v in stage if op == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["fabricproof"] and "fabricproof" in scripts
    # Every file of the repository it installs exists there, and is executable.
    for word in runs.split():
        if word.startswith("/src/fabricproof/"):
            path = REPO / word.removeprefix("/src/fabricproof/")
            assert path.exists(), word
            assert path == REPO or path.stat().st_mode & 0o111, word


def test_kubectl_comes_from_the_kubernetes_projects_image():
    steps = _instructions()
    stages = [v for op, v in steps if op == "FROM"]
    assert stages[0] == "registry.k8s.io/kubectl:${KUBECTL_VERSION} AS kubectl"
    assert ("COPY", "--from=kubectl /bin/kubectl /usr/local/bin/kubectl") in steps


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="apt-cache is missing (not a Debian machine)")
def test_its_debian_packages_exist_in_debian():
    """The packages the image installs are in Debian (this machine's apt lists: bookworm, the image's base)."""
    runs = " ".join(v for op, v in _final_stage() if op == "RUN")
    install = runs.split("--no-install-recommends", 1)[1].split("&&", 1)[0].split()
    assert "infiniband-diags" in install and "pciutils" in install
    res = subprocess.run(["apt-cache", "show", "--no-all-versions", *install], capture_output=True, text=True,
                         timeout=120, check=False)
    if "No packages found" in res.stderr and "Package: " not in res.stdout:
        pytest.skip("apt lists are empty here (apt-get update not run)")
    shown = {line.split(": ", 1)[1] for line in res.stdout.splitlines() if line.startswith("Package: ")}
    assert shown == set(install), res.stderr
