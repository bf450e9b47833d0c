"""The CI examples in inventories/ci/ (a GitHub Actions workflow and a GitLab CI job), ready to copy into another
repository: both pass their platform's published schema (check-jsonschema's bundled copies), install fabricproof as a
package, mark every value to change, use current action versions, and their commands run exactly as written in a
temporary git repository that is not this one (what `fabricproof init` wrote, saved facts, the CI file): the lint and
validate steps in the default run, every step of both jobs (the lab rehearsal included) as a slow lab test
(python -m pytest -m slow tests/cli/test_ci_examples.py)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import defusedxml.ElementTree as SafeET
import pytest
import yaml
from labkit import lab_skip_reason

from . import readme_examples
from .helpers import REPO

CI = REPO / "inventories" / "ci"
GITHUB = CI / "github-actions.yml"
GITLAB = CI / "gitlab-ci.yml"
JUNIT_XSD = REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd"


#: The newest major of each action as of late 2026 (actions/checkout v7.0.1 and actions/upload-artifact v7.0.1 were
#: released July 2026; github/codeql-action v4 replaced v3, which GitHub retires in December 2026).
CURRENT_ACTIONS = {"actions/checkout": "v7", "github/codeql-action/upload-sarif": "v4", "actions/upload-artifact": "v7"}


def github_env() -> dict[str, str]:
    return {k: str(v) for k, v in yaml.safe_load(GITHUB.read_text())["env"].items()}


def gitlab_env() -> dict[str, str]:
    return {k: str(v) for k, v in yaml.safe_load(GITLAB.read_text())["fabric"]["variables"].items()}


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


def test_both_jobs_install_fabricproof_as_a_package_and_publish_junit_and_sarif():
    doc = yaml.safe_load(GITHUB.read_text())
    (job,) = doc["jobs"].values()
    install = next(s["run"] for s in job["steps"] if s.get("id") == "install")
    gitlab = yaml.safe_load(GITLAB.read_text())["fabric"]
    for script in (install, "\n".join(gitlab["before_script"])):
        assert "apt-get install -y -q openssh-server" in script
        assert 'python -m pip install -q "$FABRICPROOF_PACKAGE"' in script and "-e ." not in script
    assert job["container"] == gitlab["image"]  # one image: what one job proves, the other runs the same way
    uses = {s.get("uses", "").split("@")[0]: s.get("with", {}) for s in job["steps"]}
    assert uses["github/codeql-action/upload-sarif"]["sarif_file"] == "reports/fabric.sarif"
    assert gitlab["artifacts"]["reports"]["junit"] == "reports/junit.xml"


def test_the_github_workflow_uses_current_action_versions():
    (job,) = yaml.safe_load(GITHUB.read_text())["jobs"].values()
    used = dict(s["uses"].split("@") for s in job["steps"] if "uses" in s)
    assert used == CURRENT_ACTIONS


def test_every_value_to_change_is_marked_and_both_files_agree():
    assert github_env() == gitlab_env()
    for path in (GITHUB, GITLAB):
        text = path.read_text()
        for name in github_env():
            (line,) = [ln for ln in text.splitlines() if ln.strip().startswith(f"{name}:")]
            assert "# CHANGE ME" in line, line
        # nothing of this repository's own layout: the steps read only the variables
        assert "inventories/" not in text.split("\n", 6)[-1], path


def _workspace() -> Path:
    """Another repository: a fresh git repository outside this one holding what `fabricproof init --platform lab
    fabric` wrote, the fleet's saved facts and the CI files, and a `fabricproof` on PATH (the package under test, as
    an installed console script would be). Traversable by the lab user (0711), as labkit's lab directories are."""
    ws = Path(tempfile.mkdtemp(prefix="fabricproof-ci-test-", dir="/tmp"))
    ws.chmod(0o711)
    readme_examples.shim(ws / ".bin")
    made = readme_examples.run("git init -q . && fabricproof init --platform lab fabric", ws, ws / ".bin")
    assert made.returncode == 0, made.stderr
    shutil.copytree(REPO / "inventories" / "lab" / "facts", ws / "fabric" / "facts")
    (ws / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(GITHUB, ws / ".github" / "workflows" / "fabric.yml")
    shutil.copy(GITLAB, ws / ".gitlab-ci.yml")
    (ws / ".gitignore").write_text(".bin/\n")
    committed = readme_examples.run("git add -A && git -c user.name=ci -c user.email=ci@example.invalid commit -qm "
                                    "fabric", ws, ws / ".bin")
    assert committed.returncode == 0, committed.stderr
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ws, capture_output=True, text=True, timeout=60)
    assert Path(top.stdout.strip()) == ws.resolve() and not (ws / "inventories").exists()
    return ws


def _run(script: str, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**env, "GITHUB_STEP_SUMMARY": str(ws / "step-summary.md"), "CI": "true"}
    res = readme_examples.run(script, ws, ws / ".bin", env, timeout=900)
    assert res.returncode == 0, f"{script}\n--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-3000:]}"
    return res


def _check_reports(ws: Path) -> None:
    import xmlschema  # here, not at collection: every xdist worker collects, and its import costs ~0.3 s

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(ws / "reports" / "junit.xml"))
    assert SafeET.parse(ws / "reports" / "junit.xml").getroot().get("failures") == "0"
    assert (ws / "reports" / "fabric.sarif").read_text().lstrip().startswith("{")
    assert (ws / "reports" / "summary.md").read_text().startswith("## fabricproof: PASSED")
    assert (ws / "reports" / "fabric.html").read_text().startswith("<!DOCTYPE html>")


def test_the_lint_and_validate_steps_run_as_written_in_another_repository():
    ws = _workspace()
    try:
        steps, _ = github_steps()
        (lint,) = [s for s in steps if "baseline lint" in s]
        (validate,) = [s for s in steps if "fabricproof validate" in s]
        _run(lint, ws, github_env())
        _run(validate, ws, github_env())
        _check_reports(ws)
        assert (ws / "step-summary.md").read_text().startswith("## fabricproof: PASSED")
        (gl,) = [s for s in yaml.safe_load(GITLAB.read_text())["fabric"]["script"] if "fabricproof validate" in s]
        assert " ".join(gl.split()) in " ".join(validate.replace("\\\n", " ").split())  # one command in both files
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.lab
@pytest.mark.parametrize("jobs,env", [(github_steps, github_env), (gitlab_steps, gitlab_env)], ids=["github", "gitlab"])
def test_every_step_of_the_ci_job_runs_as_written(jobs, env):
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    ws = _workspace()
    steps, cleanup = jobs()
    try:
        for step in steps:
            _run(step, ws, env())
        _check_reports(ws)
        runs = list((ws / "reports" / "runs").iterdir())
        assert len(runs) == 1 and (ws / "reports" / "rollout.html").read_text().startswith("<!DOCTYPE html>")
    finally:
        for step in cleanup:  # `lab down`: stops every sshd of the lab by PID
            readme_examples.run(step, ws, ws / ".bin", env(), timeout=300)
        assert not (ws / ".lab").exists()
        shutil.rmtree(ws, ignore_errors=True)
