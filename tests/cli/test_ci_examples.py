"""The CI examples in inventories/ci/ (a GitHub Actions workflow and a GitLab CI job), ready to copy: both pass
their platform's published schema (check-jsonschema's bundled copies), and their commands run here exactly as
written: the validate step in the default run, every step of both jobs (the lab rehearsal included) as a slow lab
test (python -m pytest -m slow tests/cli/test_ci_examples.py)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import defusedxml.ElementTree as SafeET
import pytest
import xmlschema
import yaml
from labkit import lab_skip_reason

from . import readme_examples
from .helpers import REPO

CI = REPO / "inventories" / "ci"
GITHUB = CI / "github-actions.yml"
GITLAB = CI / "gitlab-ci.yml"
JUNIT_XSD = REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd"


def github_steps() -> tuple[list[str], list[str]]:
    """(the job's `run:` scripts but the install step's, in order; the `if: always()` ones that clean up)."""
    (job,) = yaml.safe_load(GITHUB.read_text())["jobs"].values()
    runs = [s for s in job["steps"] if "run" in s and s.get("id") != "install"]
    return [s["run"] for s in runs if "always()" not in s.get("if", "")], [s["run"] for s in runs if "always()" in s.get("if", "")]


def gitlab_steps() -> tuple[list[str], list[str]]:
    """GitLab runs a job's `script:` lines in one shell (a variable set on one line is there on the next), its
    `after_script:` in another."""
    job = yaml.safe_load(GITLAB.read_text())["fabric"]
    return ["\n".join(job["script"])], ["\n".join(job["after_script"])]


def _lint(schema: str, path: Path) -> None:
    tool = shutil.which("check-jsonschema")
    if tool is None:
        pytest.skip("check-jsonschema not installed: python -m pip install -e '.[test]'")
    res = subprocess.run([tool, "--builtin-schema", schema, str(path)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_github_workflow_passes_the_github_workflow_schema():
    _lint("vendor.github-workflows", GITHUB)


def test_the_gitlab_job_passes_the_gitlab_ci_schema():
    _lint("vendor.gitlab-ci", GITLAB)


def test_both_jobs_install_as_the_readme_does_and_publish_junit_and_sarif():
    doc = yaml.safe_load(GITHUB.read_text())
    (job,) = doc["jobs"].values()
    install = next(s["run"] for s in job["steps"] if s.get("id") == "install")
    gitlab = yaml.safe_load(GITLAB.read_text())["fabric"]
    for script in (install, "\n".join(gitlab["before_script"])):
        assert "apt-get install -y -q openssh-server" in script and "python -m pip install -q -e ." in script
    assert job["container"] == gitlab["image"]  # one image: what one job proves, the other runs the same way
    uses = {s.get("uses", "").split("@")[0]: s.get("with", {}) for s in job["steps"]}
    assert uses["github/codeql-action/upload-sarif"]["sarif_file"] == "reports/fabric.sarif"
    assert gitlab["artifacts"]["reports"]["junit"] == "reports/junit.xml"


def _workspace() -> Path:
    """A checkout-like working directory: the repo's inventories, a `fabricproof` on PATH. Traversable by the lab
    user (0711), as labkit's lab directories are."""
    ws = Path(tempfile.mkdtemp(prefix="fabricproof-ci-test-", dir="/tmp"))
    ws.chmod(0o711)
    (ws / "inventories").symlink_to(REPO / "inventories")
    readme_examples.shim(ws / ".bin")
    return ws


def _run(script: str, ws: Path) -> subprocess.CompletedProcess:
    env = {"GITHUB_STEP_SUMMARY": str(ws / "step-summary.md"), "CI": "true"}
    res = readme_examples.run(script, ws, ws / ".bin", env, timeout=900)
    assert res.returncode == 0, f"{script}\n--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-3000:]}"
    return res


def _check_reports(ws: Path) -> None:
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(ws / "reports" / "junit.xml"))
    assert SafeET.parse(ws / "reports" / "junit.xml").getroot().get("failures") == "0"
    assert (ws / "reports" / "fabric.sarif").read_text().lstrip().startswith("{")
    assert (ws / "reports" / "summary.md").read_text().startswith("## fabricproof: PASSED")
    assert (ws / "reports" / "fabric.html").read_text().startswith("<!DOCTYPE html>")


def test_the_validate_step_runs_as_written_and_writes_the_artifacts_ci_publishes():
    ws = _workspace()
    try:
        steps, _ = github_steps()
        (validate,) = [s for s in steps if "fabricproof validate" in s]
        _run(validate, ws)
        _check_reports(ws)
        assert (ws / "step-summary.md").read_text().startswith("## fabricproof: PASSED")
        (gl,) = [s for s in yaml.safe_load(GITLAB.read_text())["fabric"]["script"] if "fabricproof validate" in s]
        assert " ".join(gl.split()) in " ".join(validate.replace("\\\n", " ").split())  # one command in both files
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.lab
@pytest.mark.parametrize("jobs", [github_steps, gitlab_steps], ids=["github", "gitlab"])
def test_every_step_of_the_ci_job_runs_as_written(jobs):
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    ws = _workspace()
    steps, cleanup = jobs()
    try:
        for step in steps:
            _run(step, ws)
        _check_reports(ws)
        runs = list((ws / "reports" / "runs").iterdir())
        assert len(runs) == 1 and (ws / "reports" / "rollout.html").read_text().startswith("<!DOCTYPE html>")
    finally:
        for step in cleanup:  # `lab down`: stops every sshd of the lab by PID
            readme_examples.run(step, ws, ws / ".bin", timeout=300)
        assert not (ws / ".lab").exists()
        shutil.rmtree(ws, ignore_errors=True)
