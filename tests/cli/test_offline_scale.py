"""`validate --facts` over a directory of many hosts: each host's facts are read, validated and judged once, one at a
time, so memory does not hold the directory; the report is the one the whole-directory evaluation gives."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import memkit
import pytest

from fabricproof import __version__
from fabricproof import facts as facts_mod
from fabricproof.judging import baseline as baseline_mod
from fabricproof.judging import catalog
from fabricproof.judging.evaluate import evaluate, exit_code
from fabricproof.reporters import REPORTERS

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventories" / "lab"
#: Hosts cloned from the four lab facts (~170 KB each). Held whole, as before, they took ~0.55 MB each in memory
#: (583 MB for 1,000): 400 of them ~280 MB. Judged one at a time the client stays near its start-up size.
HOSTS, PEAK_LIMIT_MB = 400, 150
#: The default run's two sizes: between them the peak may grow by the judged results alone (~22 KB a host measured,
#: 49.3 -> 51.9 MiB), not by the facts (~560 KB a host held whole: 66 MB more at the larger).
FEW, MORE, GROWTH_PER_HOST = 40, 160, 64 * 1024
MB = 1 << 20


def clone_fleet(directory: Path, hosts: int) -> Path:
    """`hosts` facts files cloned round-robin from the lab's, every 25th with a fault (an IB port downtrained to
    200, one NVLink down), written compact as the run store writes them."""
    templates = [json.loads(p.read_text()) for p in sorted((LAB / "facts").glob("*.json"))]
    directory.mkdir()
    for i in range(hosts):
        src = templates[i % len(templates)]
        doc = copy.deepcopy(src)
        name = f"{src['host'].rsplit('-', 1)[0]}-{i:05d}"
        doc["host"] = name
        if i % 25 == 3 and doc.get("ib", {}).get("ibstat", {}).get("ports"):
            doc["ib"]["ibstat"]["ports"][0]["rate"] = 200
        if i % 25 == 7 and doc.get("nvlink", {}).get("status", {}).get("gpus"):
            doc["nvlink"]["status"]["gpus"][0]["links_active"] -= 1
        (directory / f"{name}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return directory


def _comparable(report_text: str) -> dict:
    doc = json.loads(report_text)
    doc.pop("created_at", None)
    doc.get("metadata", {}).pop("created_at", None)
    return doc


def _validate_as_the_whole_directory_evaluation(tmp_path: Path, hosts: int) -> int:
    """validate --facts over `hosts` cloned hosts in a process of its own: its JSON report is the one the
    whole-directory evaluation gives; its peak RSS in bytes."""
    facts_dir = clone_fleet(tmp_path / f"facts-{hosts}", hosts)
    report_path = tmp_path / f"report-{hosts}.json"
    code, peak = memkit.run_measured(["validate", "--facts", str(facts_dir), "-b", str(LAB / "baseline.yaml"),
                                      "-f", f"json={report_path}"], tmp_path / f"output-{hosts}", limit_s=900)
    output = (tmp_path / f"output-{hosts}").read_text()
    # The whole-directory evaluation, as validate --facts ran before: every host's facts held, then judged.
    report = evaluate(facts_mod.load_dir(facts_dir), baseline_mod.load(LAB / "baseline.yaml"), catalog.load(),
                      run_id="", tool_version=__version__)
    assert code == exit_code(report) == 1, output  # the faulted hosts fail
    whole = "".join(REPORTERS["json"].pieces(report))
    assert _comparable(report_path.read_text()) == _comparable(whole)
    return peak


def test_validate_facts_memory_grows_by_the_results_not_the_facts_and_reports_as_the_whole_directory(tmp_path):
    """The default twin of the slow 400-host test below: at two sizes the peak differs by far less than the
    facts of the added hosts would take held whole."""
    few = tmp_path / "few"
    few.mkdir()
    code, peak_few = memkit.run_measured(["validate", "--facts", str(clone_fleet(few / "facts", FEW)),
                                          "-b", str(LAB / "baseline.yaml")], few / "output", limit_s=900)
    assert code == 1, (few / "output").read_text()
    peak_more = _validate_as_the_whole_directory_evaluation(tmp_path, MORE)
    assert peak_more - peak_few < GROWTH_PER_HOST * (MORE - FEW), (f"peak RSS {peak_few / MB:.1f} MiB for {FEW} "
                                                                   f"hosts, {peak_more / MB:.1f} MiB for {MORE}")
    assert peak_more < PEAK_LIMIT_MB * MB, f"peak RSS {peak_more / MB:.0f} MiB for {MORE} hosts"


@pytest.mark.slow
def test_validate_facts_judges_a_host_at_a_time_and_reports_as_the_whole_directory_evaluation(tmp_path):
    peak = _validate_as_the_whole_directory_evaluation(tmp_path, HOSTS)
    assert peak < PEAK_LIMIT_MB * MB, f"peak RSS {peak / MB:.0f} MiB for {HOSTS} hosts"


def test_a_scratch_file_the_disk_refuses_is_exit_6_naming_its_directory(tmp_path, monkeypatch):
    """Past a small run's size the results go to an unlinked scratch file in $TMPDIR: a full disk there is one line
    naming that directory (the file has no name), exit 6, and no report."""
    from diskkit import small_tmpfs
    from .helpers import run

    from fabricproof.judging import packing

    monkeypatch.setattr(packing, "CHUNK", 2)  # the lab's four hosts spill as a fleet would
    report_path = tmp_path / "report.json"
    with small_tmpfs(tmp_path / "disk", "4k") as disk:
        (disk / "filler").write_bytes(b"\0" * 4096)
        monkeypatch.setattr(tempfile, "tempdir", str(disk))
        result = run("validate", "--facts", LAB / "facts", "-b", LAB / "baseline.yaml", "-f", f"json={report_path}")
    assert result.exit_code == 6, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {disk}: No space left on device"), lines
    assert not report_path.exists()


def test_validate_keeps_the_checked_catalog_for_the_next_run_and_a_refused_run_keeps_none(private_state_dir, tmp_path):
    """As check --local does: the shipped catalog is read back by later runs (start-up is a fleet's fixed cost), kept
    only once the run has judged; bad input (exit 2) leaves nothing behind."""
    from .helpers import run

    kept = private_state_dir / "cache" / f"{catalog.CACHE_NAME}.json"
    refused = run("validate", "--facts", LAB / "facts", "-b", tmp_path / "missing.yaml")
    assert refused.exit_code == 2 and not kept.exists(), refused.output
    judged = run("validate", "--facts", LAB / "facts", "-b", LAB / "baseline.yaml")
    assert judged.exit_code in (0, 1, 3) and kept.is_file(), judged.output
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
