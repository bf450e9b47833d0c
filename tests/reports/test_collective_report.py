"""A collective run in the reports (issue 22.6): report.json's `collective` section (every test's figures and outcome,
the search's path round by round, the suspects confirmed and with whom, the verdict with its evidence chain and the
operator's sentence) and the HTML page's Collectives section, built from the search over a modelled fleet; the page
is checked in headless Chromium against the JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from fabricproof.judging import catalog
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.evaluate import evaluate
from fabricproof.model import Report
from fabricproof.probes import collective, collective_section
from fabricproof.probes.isolation import Outcome, search
from fabricproof.probes.isolation_sim import Fleet
from fabricproof.reporters import html_report, json_report
from probes.test_collective import _Modelled, modelled_run

from .test_pages import _assert_clean, _shot, browser  # noqa: F401 - fixture

SAMPLES = Path(__file__).resolve().parents[1] / "collectors" / "probes" / "samples"
H100 = SAMPLES / "nccl-tests-all-reduce-h100-2node-16rank-srun-label-prefix-nccl-tests-issue-290.txt"
CHECKS = ("perf.collective_busbw", "perf.collective_at_fault")


def judged(run: collective.Collective, verdict, stopped: str | None = None) -> Report:
    """The report `fabricproof collective run` makes: the hosts' facts judged by the collective checks, the run's
    section added."""
    docs = collective.facts_documents(run, verdict, {})
    report = evaluate(docs, Baseline("b", run.values), [c for c in catalog.load() if c.id in CHECKS])
    return replace(report, collective=collective_section.section(run, verdict, stopped))


def document(report: Report) -> dict:
    doc = json.loads(json_report.render(report))
    json_report.validate_document(doc)
    return doc


def test_report_json_carries_every_test_and_the_searchs_path_to_the_verdict(tmp_path):
    run, verdict = modelled_run(tmp_path, bad={"n05": 0.5}, pairs={frozenset(("n10", "n11")): 0.6})
    report = judged(run, verdict)
    text = json_report.render(report)
    c = document(report)["collective"]
    assert (c["scale"], c["launcher"], c["threshold_gbps"], c["stopped"]) == ("all", "srun", 340.0, None)
    # every test, one per launch and per decision of the search, with its round, group, figure and outcome
    assert [t["index"] for t in c["tests"]] == list(range(len(run.launches))) == [d.index for d in verdict.decisions]
    result = {"pass": "pass", "slow": "slow", "borderline": "borderline", "failed": "fail"}
    for t, d, la in zip(c["tests"], verdict.decisions, run.launches, strict=True):
        assert (t["round"], t["hosts"], t["busbw_gbps"], t["why"]) == (d.round, list(d.group), la.outcome.figure, d.why)
        assert t["outcome"] == result[d.result] and t["threshold_gbps"] == 340.0
    # the path: each round with the tests it ran at once
    s = c["search"]
    assert (s["state"], s["rounds"], s["tests"]) == ("at fault", verdict.rounds, verdict.tests)
    assert [p["round"] for p in s["path"]] == list(range(1, verdict.rounds + 1))
    assert [i for p in s["path"] for i in p["tests"]] == list(range(verdict.tests))
    assert all(c["tests"][i]["round"] == p["round"] for p in s["path"] for i in p["tests"])
    # the suspect confirmed twice beside hosts that passed, and with which
    n05 = [k for k in s["confirmations"] if k["suspects"] == ["n05"]]
    assert len(n05) == 2 and all(k["outcome"] == "slow" for k in n05)
    partners = [p for k in n05 for p in k["partners"]]
    assert len(set(partners)) == 2 and not set(partners) & {"n05", "n10", "n11"}
    assert all(c["tests"][k["test"]]["references"] == k["partners"] for k in s["confirmations"])
    # the verdict and its evidence chain: tests that hold the host, the last two its confirmations
    (host,) = [f for f in s["findings"] if f["kind"] == "host"]
    (pair,) = [f for f in s["findings"] if f["kind"] == "pair"]
    assert host["members"] == ["n05"] and all("n05" in c["tests"][i]["hosts"] for i in host["evidence"])
    assert host["evidence"][-2:] == [k["test"] for k in n05]
    assert pair["members"] == ["n10", "n11"] and (s["hosts"], s["pairs"]) == (["n05"], [["n10", "n11"]])
    assert c["sentence"] == ("n05 is at fault: slow with two hosts that passed "
                             f"({', '.join(partners)}); n10 and n11 are slow together, each fine in its own group: "
                             f"the cable or path between them ({verdict.rounds} rounds, {verdict.tests} tests).")
    # read back whole, and the checks judged the same hosts the section names
    assert json_report.report_from_json(text).collective == c
    assert {r.host for r in report.results if r.check_id == "perf.collective_at_fault" and r.outcome.value == "fail"} \
        == {"n05", "n10", "n11"}


def test_a_path_between_leaves_is_the_fabrics_and_the_sentence_says_so(tmp_path):
    hosts = [f"n{i:02d}" for i in range(18)]
    fleet = Fleet(hosts, {h: f"leaf{i // 6}" for i, h in enumerate(hosts)}, uplinks={"leaf2": 0.5})
    run = _Modelled(fleet, tmp_path)
    verdict = search(hosts, run, collective.search_settings(run.values, "all"), leaves=fleet.leaves)
    s = document(judged(run, verdict))["collective"]
    (finding,) = s["search"]["findings"]
    assert (finding["kind"], finding["members"], s["search"]["hosts"]) == ("path", ["leaf2", "spines"], [])
    assert s["sentence"].startswith("The uplinks of leaf leaf2 to the spines are slow: the fabric, not its hosts")


def test_without_a_search_each_group_is_judged_against_the_threshold(tmp_path):
    hosts = [f"n{i:02d}" for i in range(16)]
    run = _Modelled(Fleet(hosts, {h: "leaf0" for h in hosts}, bad={"n05": 0.5}), tmp_path)
    run([hosts[:8], hosts[8:]])
    c = document(judged(run, None))["collective"]
    assert [(t["round"], t["outcome"], t["why"], t["references"]) for t in c["tests"]] == [
        (1, "slow", None, []), (1, "pass", None, [])]
    assert c["search"] is None
    assert c["sentence"] == ("1 of 2 groups below 340 GB/s or failed: run with --search to find the host(s), pair or "
                             "path at fault.")
    stopped = document(judged(run, None, stopped="not run: hosts not idle: n03: Slurm shows it allocated"))
    assert stopped["collective"]["sentence"].startswith("The run stopped: not run: hosts not idle: n03: Slurm shows "
                                                        "it allocated. 1 of 2 groups")


def _launched(run: collective.Collective, text: str, hosts: list[str], round_: int) -> None:
    """A launch whose output is `text`, read as the runner reads a finished step's output."""
    outcome, parsed = collective.outcome(text, hosts)
    run.launches.append(collective.Launch(len(run.launches), tuple(hosts), ("srun",), run.dir / "x.out", "fp",
                                          outcome=outcome, parsed=parsed, seconds=2.0, round=round_))


def test_figures_come_from_the_tools_table_and_failures_keep_the_tools_words(tmp_path):
    values = {"perf": {"probes": {"collective": {"thresholds": {"all": 150}}}}}
    run = collective.Collective(values, "all", tmp_path / "ev", env={})
    full = H100.read_text()
    _launched(run, full, ["node005", "node007"], 1)
    lines = full.splitlines(keepends=True)
    cut = "".join(lines[:next(i for i, line in enumerate(lines) if "redop" in line) + 1])  # the header, no row
    _launched(run, cut, ["node005", "node007"], 1)
    _launched(run, full + " 8: srun: error: node007: task 8: Exited with exit code 1 <&>\n", ["node005", "node007"], 2)
    run.launches.append(collective.Launch(3, ("node005", "node007"), ("srun",), run.dir / "y.out", "fp",
                                          outcome=Outcome.failed("no result within 3 s: the job step was cancelled",
                                                                 "timeout"), round=2))
    report = judged(run, None)
    tests = document(report)["collective"]["tests"]
    ok, hung, ended, timed_out = tests
    # the avg busbw line, and the algbw at the largest size (the lower of out-of-place and in-place)
    assert (ok["busbw_gbps"], ok["algbw_gbps"], ok["outcome"]) == (142.735, 82.96, "slow")
    assert (hung["outcome"], hung["failure_kind"], hung["busbw_gbps"]) == ("hang", "hang", None)
    assert "hung" in hung["failure"]
    assert (ended["outcome"], ended["failure_kind"]) == ("fail", "error")
    assert ended["failure"].startswith("the launcher ended the run: srun: error: node007: task 8: Exited")
    assert (timed_out["outcome"], timed_out["failure"]) == ("hang", "no result within 3 s: the job step was cancelled")
    page = html_report.render(report)
    assert "srun: error: node007: task 8: Exited with exit code 1 &lt;&amp;&gt;" in page and "<&>" not in page


def test_the_page_puts_the_verdict_first_escapes_host_data_and_has_no_section_without_collectives(tmp_path):
    run, verdict = modelled_run(tmp_path, bad={"n05": 0.5})
    report = judged(run, verdict)
    page = html_report.render(report)
    section = page[page.index('<section id="collective"'):page.index("</section>", page.index('id="collective"'))]
    assert section.index('class="coll-verdict') < section.index('class="coll-findings') \
        < section.index('class="coll-confirm') < section.index('class="coll-tests')
    assert page.index('id="collective"') < page.index('id="heatmap"')  # what the run is about, before the fleet
    assert report.collective["sentence"] in section
    # a hostile tool's words and host name are text
    hostile = dict(report.collective, sentence="<script>alert(1)</script>",
                   tests=[dict(report.collective["tests"][0], hosts=['"><img src=x>', "n01"], failure="<b>bold</b>")])
    drawn = html_report.render(replace(report, collective=hostile))
    assert "<script>alert" not in drawn and "<img" not in drawn and "<b>bold" not in drawn
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in drawn and "&lt;b&gt;bold&lt;/b&gt;" in drawn
    bare = html_report.render(replace(report, collective=None))
    assert 'id="collective"' not in bare and "coll-verdict" not in bare
    assert "collective" not in json.loads(json_report.render(replace(report, collective=None)))


def test_the_collectives_section_in_chromium_matches_report_json(browser, tmp_path):  # noqa: F811
    run, verdict = modelled_run(tmp_path, bad={"n05": 0.5}, pairs={frozenset(("n10", "n11")): 0.6})
    report = judged(run, verdict)
    c = document(report)["collective"]
    path = tmp_path / "collective.html"
    path.write_text(html_report.render(report), encoding="utf-8")
    page = browser.open(path, height=1600)
    _assert_clean(page, path)
    _shot(page, "collective-search")
    assert page.js("document.querySelector('#collective .coll-verdict').innerText") == f"Verdict {c['sentence']}"
    assert page.js("document.querySelector('main > section').id") == "collective"
    rows = page.js("Array.from(document.querySelectorAll('tr.coll-test')).map(r => [Number(r.dataset.index), "
                   "Number(r.dataset.round), r.dataset.outcome, r.cells[2].innerText, r.cells[3].innerText])")
    assert [(i, r, o) for i, r, o, _, _ in rows] == [(t["index"], t["round"], t["outcome"]) for t in c["tests"]]
    for (_, _, _, group, figure), t in zip(rows, c["tests"], strict=True):
        assert group == (", ".join(t["hosts"]) if len(t["hosts"]) <= 8 else
                         f"{len(t['hosts'])} hosts: {t['hosts'][0]} … {t['hosts'][-1]}")
        assert figure == f"{t['busbw_gbps']:g}"
    findings = page.js("Array.from(document.querySelectorAll('tr.coll-finding')).map(r => [r.dataset.kind, "
                       "r.dataset.members, r.dataset.evidence])")
    assert findings == [[f["kind"], " ".join(f["members"]), " ".join(map(str, f["evidence"]))]
                        for f in c["search"]["findings"]]
    chain = page.js("Array.from(document.querySelectorAll('tr.coll-test.chain')).map(r => Number(r.dataset.index))")
    assert chain == sorted({i for f in c["search"]["findings"] for i in f["evidence"]})
    confirmed = page.js("Array.from(document.querySelectorAll('tr.coll-confirmation')).map(r => [Number(r.dataset.test), "
                        "r.dataset.suspects, r.dataset.partners, r.dataset.outcome])")
    assert confirmed == [[k["test"], " ".join(k["suspects"]), " ".join(k["partners"]), k["outcome"]]
                         for k in c["search"]["confirmations"]]
    # an evidence link leads to its test
    page.click("tr.coll-finding a")
    assert page.js("document.querySelector(':target').dataset.index") == str(c["search"]["findings"][0]["evidence"][0])
    assert page.problems() == []
