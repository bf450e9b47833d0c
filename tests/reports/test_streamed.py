"""A fleet's results spilled as they are judged and read back (judging.packing.Spill): every reporter writes the same
bytes as from the results held whole, and what the evaluation holds does not grow with the fleet."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from fabricproof.judging import catalog, packing
from fabricproof.judging.baseline import load as load_baseline
from fabricproof.judging.evaluate import StreamingEvaluation, exit_code
from fabricproof.judging.packing import Spilled
from fabricproof.model import Report
from fabricproof.reporters import REPORTERS

from .fleet import LAB, fleet_facts

META = {"run_id": "20261201T120000Z-streamed", "created_at": "2026-12-01T12:00:00Z", "tool_version": "0.1.0"}
#: Held reports already rendered, with each reporter's text: reporters are pure, and the in-order and shuffled runs
#: hold equal reports (the same results in host order), so an equal one is rendered once for the module.
_RENDERED: list[tuple[Report, dict[str, str]]] = []


def _rendered(held: Report) -> dict[str, str]:
    """Every reporter's text of `held`, rendered once per distinct held report."""
    for report, texts in _RENDERED:
        if report == held:
            return texts
    texts = {name: "".join(reporter.pieces(held)) for name, reporter in REPORTERS.items()}
    _RENDERED.append((held, texts))
    return texts


def _judged(nodes: int, lost: int, shuffle: bool) -> Report:
    """The fault-matrix fleet judged a host at a time, in name order or in a seeded random order (hosts of a live
    collection finish in any order)."""
    facts, groups, errors = fleet_facts(nodes, lost)
    stream = StreamingEvaluation(load_baseline(LAB / "baseline.yaml"), catalog.load(), groups=groups)
    hosts = sorted(facts)
    if shuffle:
        random.Random(23).shuffle(hosts)
    for host in hosts:
        stream.add(host, facts[host])
    return stream.finish(errors, **META)


@pytest.mark.parametrize("shuffle", [False, True], ids=["in-order", "shuffled"])
def test_every_reporter_writes_the_same_bytes_from_spilled_results_as_from_held_ones(monkeypatch, shuffle):
    monkeypatch.setattr(packing, "CHUNK", 7)  # many chunks per check, spilled to the file, even at 120 hosts
    spilled = _judged(120, lost=3, shuffle=shuffle)
    assert isinstance(spilled.results, Spilled)
    held = replace(spilled, results=tuple(spilled.results))  # the report as it was: one tuple, counted by iterating
    assert held.results == spilled.results and len(held.results) == len(spilled.results)
    judged = sorted(set(spilled.hosts) - set(spilled.collection_errors))
    assert [r.host for r in held.results[:120]] == judged + sorted(spilled.collection_errors)  # in host order
    assert spilled.summary == held.summary and spilled.summary.failed and spilled.summary.errors
    for fail_on in ("critical", "warning", "info"):
        assert exit_code(spilled, fail_on) == exit_code(held, fail_on)
    texts = _rendered(held)
    for name, reporter in sorted(REPORTERS.items()):
        assert "".join(reporter.pieces(spilled)) == texts[name], name


def test_a_fleet_evaluation_holds_at_most_a_chunk_of_results_per_check_and_reads_them_back_each_time(monkeypatch):
    monkeypatch.setattr(packing, "CHUNK", 16)  # a fleet of 60 hosts is then as a fleet of ~1,000 with the default
    report = _judged(60, lost=2, shuffle=True)
    spill = report.results._spill
    assert spill.spilled > 0  # the results went to the file
    assert max(len(pending) for pending in spill._records._pending) < packing.CHUNK  # never more than a chunk per check held
    first, again = list(report.results), list(report.results)
    assert first == again and len(first) == len(report.results) == report.summary.total


def test_a_small_run_keeps_its_results_in_memory_and_creates_no_file():
    report = _judged(16, lost=1, shuffle=False)
    assert not report.results._spill._records._scratch.created and report.results._spill.spilled == 0


def test_the_json_report_reads_a_fleets_results_back_once(monkeypatch):
    """The host actions after the results are gathered in the same pass: a fleet's results come back from the spill
    file, so a second pass (host_actions over them) read it all again."""
    monkeypatch.setattr(packing, "CHUNK", 7)
    report = _judged(40, lost=1, shuffle=False)
    reads = []
    real, fields = Spilled.__iter__, Spilled.fields  # the results, or their fields (what the JSON report reads)
    monkeypatch.setattr(Spilled, "__iter__", lambda self: reads.append(1) or real(self))
    monkeypatch.setattr(Spilled, "fields", lambda self: reads.append(1) or fields(self))
    text = "".join(REPORTERS["json"].pieces(report))
    assert len(reads) == 1
    held = replace(report, results=tuple(real(report.results)))
    assert text == "".join(REPORTERS["json"].pieces(held))  # and the same bytes, host actions included
    assert '"host_actions": {}' not in text
