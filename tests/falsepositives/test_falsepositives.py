"""The false positives peers are known for, as a regression corpus (issue 25.4): each case directory holds raw outputs,
and the verdicts fabricproof must reach on them through the real parsers, the facts build and the evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dataclasses

import pytest
import yaml
from fabricproof.judging import baseline as baselines
from fabricproof import capture, facts
from fabricproof.judging.evaluate import evaluate
from fabricproof.model import CommandResult

from catalogkit import shipped_checks

HERE = Path(__file__).parent
REPO = HERE.parents[1]
CHECKS = {c.id: c for c in shipped_checks()}  # the repository's checks/, loaded once per test process
CASES = sorted(p.parent.name for p in HERE.glob("*/case.yaml"))


def _case(name: str) -> dict[str, Any]:
    return yaml.safe_load((HERE / name / "case.yaml").read_text(encoding="utf-8"))


def _facts(name: str, case: dict[str, Any]) -> dict[str, Any]:
    outputs = {cid: CommandResult((), (HERE / name / rel).read_text(encoding="utf-8", errors="surrogateescape"))
               for cid, rel in case["outputs"].items()}
    doc = facts.mark_not_applicable(facts.build(case["host"], outputs, via="replay"))
    for cid, run in doc["collectors"].items():
        assert run["status"] == "ok", f"{name}: {cid} did not parse: {run.get('error')}"
    return doc


def _baseline(name: str, rel: str) -> baselines.Baseline:
    local = HERE / name / rel
    return baselines.load(local if local.is_file() else REPO / rel)


def test_the_corpus_has_cases() -> None:
    assert len(CASES) >= 9, CASES


@pytest.mark.parametrize("name", CASES)
def test_case_reaches_its_expected_verdicts(name: str) -> None:
    case = _case(name)
    doc = _facts(name, case)
    if "platform" in case:
        assert facts.host_platform(doc) == case["platform"]
    if "captured_platform" in case:
        assert capture.capture(doc).get("platform") == case["captured_platform"]
    # A check names one collector (nvidia_smi_q); where a case holds the same facts from another front-end (the XML
    # of a real node: no text -q of it is public), the check is judged from that one.
    instead = case.get("collector_for") or {}
    checks = [dataclasses.replace(c, collector=instead.get(c.collector, c.collector))
              for c in (CHECKS[cid] for cid in case["expect"])]
    report = evaluate({case["host"]: doc}, _baseline(name, case["baseline"]), checks)
    got = {r.check_id: r for r in report.results}
    for cid, want in case["expect"].items():
        r = got[cid]
        seen = f"{r.outcome.value}: {r.reason} ({r.actual})"
        assert r.outcome.value == want["verdict"], f"{name} {cid}: {seen}"
        if "reason" in want:
            assert want["reason"] in f"{r.reason} {r.actual} {' '.join(str(f) for f in r.findings)}", f"{name} {cid}: {seen}"


def test_every_sample_has_a_provenance_row() -> None:
    provenance = (HERE / "PROVENANCE.md").read_text(encoding="utf-8")
    samples = {(HERE / name / rel).resolve().relative_to(HERE).as_posix()
               for name in CASES for rel in _case(name)["outputs"].values()}
    assert sorted(s for s in samples if f"| {s} |" not in provenance) == []
