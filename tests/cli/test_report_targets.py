"""-f FORMAT[=PATH]: a file is named with its format, so no file can get another format's output; the README's
validate examples (README.md, section Validate) run exactly as printed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import defusedxml.ElementTree as SafeET
import pytest
import yaml
from fabricproof.commands._common import report_targets
from fabricproof.errors import InputError
from fabricproof.reporters import REPORTERS

from . import readme_examples
from .helpers import REPO, run

EXAMPLES = readme_examples.section(Path(__file__).resolve().parents[2] / "README.md", "### Validate")
JUNIT_XSD = REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd"
LAB = REPO / "inventories" / "lab"


def test_each_file_gets_the_format_it_is_named_with(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()  # a file's directory must exist: it is checked before anything runs
    assert report_targets(["table", "junit=junit.xml", "sarif=out/fabric.sarif", "markdown=a=b.md"], REPORTERS) == [
        ("table", None), ("junit", Path("junit.xml")), ("sarif", Path("out/fabric.sarif")), ("markdown", Path("a=b.md"))]
    assert report_targets([], REPORTERS) == [("table", None)]
    assert report_targets(["json=-"], REPORTERS) == [("json", None)]  # '-' is stdout, as for most tools


@pytest.mark.parametrize(("specs", "outputs", "needle"), [
    (["junit"], [Path("junit.xml")], "--output is gone: name the file with its format, -f FORMAT=PATH"),
    (["xml=junit.xml"], None, "unknown format 'xml'"),
    (["junit="], None, "no file after '='"),
    (["json", "tap"], None, "only one --format can go to stdout (json, tap); give the others a file: -f tap=PATH"),
    (["junit=r.out", "sarif=./r.out"], None, "r.out already receives the junit report"),
])
def test_a_mismatch_is_impossible_or_an_error(specs, outputs, needle):
    with pytest.raises(InputError) as exc:
        report_targets(specs, REPORTERS, outputs=outputs)
    assert needle in str(exc.value)


def test_the_old_positional_pairing_exits_2_and_writes_nothing(tmp_path):
    """`-f table -f junit -o junit.xml` wrote the table into junit.xml: now it is refused before anything runs."""
    res = run("validate", "--facts", LAB / "facts", "-b", LAB / "baseline.yaml", "-f", "table", "-f", "junit",
              "-o", tmp_path / "junit.xml", "-f", "sarif", "-o", tmp_path / "fabric.sarif")
    assert res.exit_code == 2 and "--output is gone" in res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """What the README's examples name, laid out as an operator's working directory: the repo's inventories, a
    saved run (runs/last: the lab's facts), its baseline and inventory, and two snapshots around a soak during
    which one NVLink's recovery counter grew."""
    ws = tmp_path_factory.mktemp("readme")
    (ws / "inventories").symlink_to(REPO / "inventories")
    shutil.copytree(LAB / "facts", ws / "runs" / "last")
    shutil.copytree(LAB / "facts", ws / "runs" / "before-soak")
    shutil.copytree(LAB / "facts", ws / "runs" / "after-soak")
    grown = ws / "runs" / "after-soak" / "h100-0001.json"
    doc = json.loads(grown.read_text())
    doc["nvlink"]["errors"]["links"][5]["recovery"] += 2
    grown.write_text(json.dumps(doc))
    shutil.copy(LAB / "baseline.yaml", ws / "baseline.yaml")
    hosts = {p.stem: json.loads(p.read_text())["groups"] for p in (LAB / "facts").glob("*.json")}
    groups: dict[str, dict] = {}
    for host, names in hosts.items():
        for g in names:
            groups.setdefault(g, {"hosts": {}})["hosts"][host] = {}
    (ws / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": groups}}))
    readme_examples.shim(ws / ".bin")
    return ws


def test_the_readme_examples_are_the_ones_this_test_runs():
    cmds = readme_examples.commands(EXAMPLES)
    assert len(cmds) == 4 and all(c.startswith("fabricproof validate ") for c in cmds)
    assert "-f junit=junit.xml -f sarif=fabric.sarif" in cmds[1] and " -o " not in " ".join(cmds)


def test_the_readme_validate_examples_run_as_printed_and_write_the_right_artifacts(workspace):
    offline, ci, subset, deltas = readme_examples.commands(EXAMPLES)
    summary = workspace / "step-summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary), "COLUMNS": "80"}

    def sh(command: str):
        return readme_examples.run(command, workspace, workspace / ".bin", env)

    res = sh(offline)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("PASSED")

    res = sh(ci)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("PASSED") and "Hosts" in res.stdout  # the table, on stdout
    junit = workspace / "junit.xml"
    import xmlschema  # here, not at collection: every xdist worker collects, and its import costs ~0.3 s

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))  # JUnit XML, as Jenkins/GitLab read it
    assert SafeET.parse(junit).getroot().tag == "testsuites"
    sarif = json.loads((workspace / "fabric.sarif").read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["tool"]["driver"]["name"] == "fabricproof"
    assert summary.read_text().startswith("## fabricproof: PASSED")  # markdown, for the CI step summary
    assert {f"wrote {f} report to {p}" for f, p in (("junit", "junit.xml"), ("sarif", "fabric.sarif"),
                                                    ("markdown", summary))} <= set(res.stderr.splitlines())

    res = sh(subset)  # the counter-delta checks apply to no host without --previous: --require-all fails
    assert res.returncode == 1, res.stderr
    assert "nvlink.recovery_errors" in res.stdout and "needs two snapshots" in res.stdout

    res = sh(deltas)
    assert res.returncode == 1, res.stderr
    assert "nvlink.recovery_errors  h100-0001  critical" in res.stdout
    assert "recovery errors grew by 2 (at most 0)" in res.stdout


def test_a_long_report_path_is_printed_whole_at_80_columns(tmp_path):
    """The 'wrote ... to PATH' line is a message, not a table: the terminal may fold it, fabricproof never cuts
    the path with a newline (a CI log grep, or a copy and paste, must find it whole)."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    target = deep / "junit.xml"
    res = subprocess.run([sys.executable, "-m", "fabricproof", "validate", "--facts", str(LAB / "facts"), "-b",
                          str(LAB / "baseline.yaml"), "-f", f"junit={target}"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    assert f"wrote junit report to {target}" in res.stderr.splitlines()
