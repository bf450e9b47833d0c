"""Each machine format checked by its consumer's own tool: the Prometheus textfile by `promtool check metrics`
(Debian's prometheus package), the JSON report the CLI writes against schemas/report.schema.json. (JUnit against
the published JUnit XSD: tests/unit/test_reporters.py and tests/cli/test_report_targets.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fabricproof.reporters import prometheus
from typer.testing import CliRunner

from .fleet import REPO, small

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed: apt-get install -y prometheus")


def _promtool(text: str) -> subprocess.CompletedProcess:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=120,
                          check=False)


@needs_promtool
def test_the_textfile_passes_promtool_on_a_lab_fleet():
    text = prometheus.render(small())
    res = _promtool(text)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert 'fabricproof_host_action{host="' in text and ',action="reset_gpu"}' in text  # the action labels too


@needs_promtool
def test_the_textfile_passes_promtool_with_awkward_labels_and_an_empty_run():
    sys.path.insert(0, str(REPO / "tests"))
    from unit.test_reporters import EMPTY, NOT_PROVEN, REPORT  # quotes, backslashes, newlines, non-ASCII in labels

    for report in (REPORT, EMPTY, NOT_PROVEN):
        res = _promtool(prometheus.render(report))
        assert (res.returncode, res.stdout, res.stderr) == (0, "", "")


@needs_promtool
def test_promtool_does_lint_what_it_is_given():
    """The tool under the tests is a real linter: a counter without _total is refused."""
    res = _promtool("# HELP fabricproof_x x\n# TYPE fabricproof_x counter\nfabricproof_x 1\n")
    assert res.returncode != 0 and "_total" in res.stdout + res.stderr


def test_the_json_report_the_cli_writes_validates_against_the_report_schema(tmp_path):
    import jsonschema
    from fabricproof.cli import app

    report = tmp_path / "report.json"
    res = CliRunner().invoke(app, ["validate", "--facts", str(REPO / "inventories" / "lab" / "facts"), "-b",
                                   str(REPO / "inventories" / "lab" / "baseline.yaml"), "-f", f"json={report}"])
    assert res.exit_code == 0, res.output
    schema = json.loads((REPO / "schemas" / "report.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    doc = json.loads(report.read_text())
    assert [e.message for e in validator.iter_errors(doc)] == []
    assert doc["groups"]["gb200-0001"] == ["gb200_nvl72", "lab", "rack_01"]
    doc["results"][0]["outcome"] = "flaky"
    assert not validator.is_valid(doc)
    assert Path(report).stat().st_mode & 0o777 == 0o600
