"""The HTML reports as a person sees them, in Debian's headless Chromium: they render without a console error or a
single request beyond the page itself, a screenshot is taken, and the DOM is held against the JSON report (the
heatmap's cells, the failure entries, the not-applied checks) or the run's state and decision log (the rollout
report). Screenshots go to $FABRICPROOF_SCREENSHOTS (default /tmp/fabricproof-screenshots), never into git."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fabricproof.reporters import html_report, json_report
from fabricproof.rollout import decisions
from fabricproof.rollout import state as st

from . import cdp
from .fleet import fleet, small

SHOTS = Path(os.environ.get("FABRICPROOF_SCREENSHOTS", "/tmp/fabricproof-screenshots"))
ORDER = ("f3", "f2", "f1", "e", "u", "p", "s", "n")  # worst first, as the page's legend reads


@pytest.fixture(scope="module")
def browser():
    reason = cdp.skip_reason()
    if reason:
        pytest.skip(reason)
    b = cdp.Browser()
    try:
        yield b
    finally:
        b.close()
    assert b.proc.returncode is not None  # stopped, by its PID


def _expected_cells(doc: dict) -> dict[tuple[str, str], str]:
    """(host, family) -> the worst outcome's cell class, computed from the JSON report alone."""
    rank = {"critical": 3, "warning": 2, "info": 1}
    code = {"error": "e", "unknown": "u", "pass": "p", "skip": "s"}
    cells: dict[tuple[str, str], str] = {}
    for r in doc["results"]:
        c = f"f{rank[r['severity']]}" if r["outcome"] == "fail" else code[r["outcome"]]
        key = (r["host"], r["family"])
        cells[key] = min(cells.get(key, "n"), c, key=ORDER.index)
    return cells


def _write(report, name: str, tmp_path: Path, with_json: bool = True) -> tuple[Path, dict]:
    page = tmp_path / f"{name}.html"
    page.write_text(html_report.render(report), encoding="utf-8")
    return page, json.loads(json_report.render(report)) if with_json else {}


def _assert_clean(page: cdp.Page, path: Path) -> None:
    assert page.problems() == []
    assert page.requests() == [path.resolve().as_uri()]  # nothing but the page itself: no CDN, no font, no image


def _shot(page: cdp.Page, name: str) -> Path:
    shot = page.screenshot(SHOTS / f"{name}.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    return shot


def test_the_validation_page_matches_its_json_report(browser, tmp_path):
    path, doc = _write(small(), "validate-16-hosts", tmp_path)
    page = browser.open(path)
    _assert_clean(page, path)
    _shot(page, "validate-16-hosts")

    families = page.js("document.getElementById('heatmap').dataset.families.split(' ')")
    tiles = page.js("Array.from(document.querySelectorAll('.t[data-host]')).map(t => "
                    "[t.dataset.host, Array.from(t.querySelectorAll('i')).map(i => i.className)])")
    shown = {(host, fam): cls for host, classes in tiles for fam, cls in zip(families, classes, strict=True)}
    expected = _expected_cells(doc)
    assert {h for h, _ in shown} == set(doc["hosts"])
    assert {k: v for k, v in shown.items() if v != "n"} == expected

    fails = {(r["check_id"], r["host"]): r for r in doc["results"] if r["outcome"] == "fail"}
    assert fails, "the fleet has failures to show"
    entries = page.js("Array.from(document.querySelectorAll('tr.failure')).map(r => [r.dataset.check, r.dataset.host, "
                      "r.cells[2].innerText, r.cells[3].innerText])")
    assert {(c, h) for c, h, _, _ in entries} == set(fails) and len(entries) == len(fails)
    for check, host, found, evidence in entries:
        r = fails[(check, host)]
        for f in r.get("findings", []):
            assert f"{f['item']}: {f['text']}" in found  # named by GPU/port, not by pointer
        assert evidence.split() == r["evidence"]
    assert any("GPU 1: 16 of 18 links active" in found for _, _, found, _ in entries)
    # each failed check says what its failure calls for, as the JSON report does
    actions = page.js("Object.fromEntries(Array.from(document.querySelectorAll('article.check')).map(a => "
                      "[a.dataset.check, a.querySelector('[data-action]').innerText]))")
    assert actions == {c: r["action"] for (c, _), r in fails.items()}
    assert {"reset_gpu", "reseat_cable"} <= set(actions.values())
    # the not-applied checks, and the hosts not collected
    assert set(page.js("Array.from(document.querySelectorAll('table.unapplied tr[data-check]')).map(r => r.dataset.check)")) \
        == {u["check_id"] for u in doc["unapplied"]}
    assert page.js("Array.from(document.querySelectorAll('tr.lost')).map(r => r.dataset.host)") == sorted(doc["collection_errors"])
    assert page.js("document.getElementById('verdict').dataset.status") == "failed"


def test_a_problem_cell_tells_the_failure_on_hover_and_leads_to_it_on_click(browser, tmp_path):
    path, doc = _write(small(), "validate-click", tmp_path)
    page = browser.open(path)
    host = page.js("document.querySelector('.t i.f3 a').closest('.t').dataset.host")
    tip = page.js("document.querySelector('.t i.f3').title")
    assert tip.startswith(f"{host} · ") and any(r["check_id"] in tip for r in doc["results"]
                                                 if r["host"] == host and r["outcome"] == "fail")
    page.click(".t i.f3 a")
    target = page.js("(function(){var t=document.querySelector(':target');return [location.hash, t && t.dataset.host, "
                     "t && t.dataset.check];})()")
    assert target[0].startswith("#f") and target[1] == host
    assert {"check_id": target[2], "host": host, "outcome": "fail"}.items() <= next(
        r for r in doc["results"] if r["check_id"] == target[2] and r["host"] == host).items()
    assert page.problems() == []


def test_the_filter_narrows_hosts_and_failures(browser, tmp_path):
    path, doc = _write(small(), "validate-filter", tmp_path)
    page = browser.open(path)
    failing = sorted({r["host"] for r in doc["results"] if r["outcome"] == "fail"})
    host = failing[0]
    page.type_into("#filter", host)
    visible_tiles = page.js("Array.from(document.querySelectorAll('.t[data-host]')).filter(t => !t.hidden)"
                            ".map(t => t.dataset.host)")
    assert visible_tiles == [h for h in sorted(doc["hosts"]) if host in h]
    rows = page.js("Array.from(document.querySelectorAll('tr.failure')).filter(r => !r.hidden).map(r => r.dataset.host)")
    assert rows and set(rows) == {host}
    assert page.js("document.getElementById('shown').textContent") == f"{len(visible_tiles)} of {len(doc['hosts'])} hosts shown"
    page.js("document.getElementById('filter').value=''; document.getElementById('filter').dispatchEvent(new Event('input'))")
    page.click("#only-problems")
    problems = {r["host"] for r in doc["results"] if r["outcome"] in ("fail", "error", "unknown")}
    shown = page.js("Array.from(document.querySelectorAll('.t[data-host]')).filter(t => !t.hidden).map(t => t.dataset.host)")
    assert set(shown) == problems
    assert page.problems() == []


#: (hosts, page size bound in bytes): the page grows by well under 1 KB a host (the old page listed every result, ~28 MB
#: at 1,000 hosts). The default run renders 200 hosts; the 1,000-host scale measurement runs with `-m slow`.
FLEETS = [pytest.param(200, 200_000, id="200-hosts"),
          pytest.param(1000, 1_000_000, id="1000-hosts", marks=pytest.mark.slow)]


@pytest.mark.parametrize(("nodes", "max_bytes"), FLEETS)
def test_the_page_of_a_large_fleet_is_small_and_renders(browser, tmp_path, nodes, max_bytes):
    report = fleet(nodes)
    name = f"validate-{nodes}-hosts"
    path, _ = _write(report, name, tmp_path, with_json=False)
    size = path.stat().st_size
    assert size < max_bytes, size
    page = browser.open(path)
    _assert_clean(page, path)
    _shot(page, name)
    assert page.js("document.querySelectorAll('.t[data-host]').length") == nodes
    assert page.js("document.querySelectorAll('tr.failure').length") == report.summary.failed
    groups = page.js("Array.from(document.querySelectorAll('.group')).map(g => g.dataset.group)")
    assert "rack_01" in groups and "dgx_h100" in groups and "lab" not in groups  # GB200 trays by rack
    (SHOTS / "sizes.json").write_text(json.dumps({f"{name}.html": size}))


# --- the rollout report --------------------------------------------------------------------------------------------


@pytest.fixture
def rolled_back_run(tmp_path, monkeypatch):
    """A real run of the executor (state, decisions, gate and soak reports) on the fake fleet of the executor tests:
    the pilot proceeds, the second wave's counters grow in the soak and it is rolled back."""
    from fabricproof.judging import catalog as catalog_mod
    from fabricproof import inventory as inventory_mod
    from fabricproof.inventory import from_list_json
    from rollout.fakes import ERRORS_CHECK, VERSION_CHECK, Fleet
    from rollout.test_executor import HOSTS, THREE, start, write_plan

    inv = from_list_json({"_meta": {"hostvars": {h: {} for h in HOSTS}}, "gpu": {"hosts": HOSTS}}, "inv.yml")
    monkeypatch.setattr(inventory_mod, "load", lambda _path: inv)
    monkeypatch.setattr(catalog_mod, "load", lambda *a, **k: [VERSION_CHECK, ERRORS_CHECK])
    code, run_id = start(tmp_path, Fleet(HOSTS, growing={"n2"}), write_plan(tmp_path, THREE))
    assert code == 4
    return tmp_path / "runs" / run_id


def test_the_rollout_report_shows_waves_gates_soak_decisions_and_rollback(browser, rolled_back_run, tmp_path):
    from fabricproof.cli import app
    from typer.testing import CliRunner

    out = tmp_path / "rollout.html"
    res = CliRunner().invoke(app, ["rollout", "status", str(rolled_back_run), "-f", f"html={out}"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    page = browser.open(out, height=1600)
    _assert_clean(page, out)
    _shot(page, "rollout-rolled-back")

    state = st.RunState.load(rolled_back_run)
    log = decisions.read(rolled_back_run)
    assert page.js("document.getElementById('verdict').dataset.status") == "rolled_back"
    # every decision, in order, with its evidence
    rows = page.js("Array.from(document.querySelectorAll('tr.decision')).map(r => [r.dataset.what, r.cells[5].innerText])")
    assert [w for w, _ in rows] == [d["what"] for d in log]
    for (_, evidence), d in zip(rows, log, strict=True):
        assert evidence.split() == d["evidence"]
    assert "ROLLBACK" in [w for w, _ in rows] and "PROCEED" in [w for w, _ in rows]
    # the soak and the wave's decision name the failed host's action (its counter grew: drain_and_inspect)
    hosts = dict(page.js("Array.from(document.querySelectorAll('tr.decision')).filter(r => ['SOAK', 'ROLLBACK']"
                         ".includes(r.dataset.what)).map(r => [r.dataset.what, r.cells[3].innerText])"))
    assert hosts == {"SOAK": "n2 (drain_and_inspect)", "ROLLBACK": "n2 (drain_and_inspect)"}
    # waves on the timeline: a lane per wave that ran, and one for the rollback; a bar per step that did work
    lanes = page.js("Array.from(document.querySelectorAll('.lane')).map(l => l.dataset.lane)")
    assert lanes == ["1. pilot", "2. early", "2. early (rb1 rollback)"]
    bars = set(page.js("Array.from(document.querySelectorAll('.bar')).map(b => b.dataset.step)"))
    worked = {s for s, rec in state.data["steps"].items() if not s.endswith((".done", ".pre_verdict"))
              and ".w" in f".{s}" and rec.get("ran") is not False}  # rb1.w1.drain: its hosts were drained already
    assert bars == worked
    # gates with their retries: one entry per attempt the state counted
    attempts = dict(page.js("Array.from(document.querySelectorAll('article.gate')).map(a => [a.dataset.step, "
                            "Number(a.dataset.attempts)])"))
    gates = {sid: rec["attempts"] for sid, rec in state.data["steps"].items() if sid.endswith(("pre_gate", "post_gate", ".gate"))}
    assert attempts == gates
    # the soak: n2's counter grew by 5 in the second wave, n3's did not
    deltas = dict(page.js("Array.from(document.querySelectorAll('article.soak[data-step=\"w1.soak\"] tr[data-host]'))"
                          ".map(r => [r.dataset.host, [r.cells[1].innerText, r.cells[1].className]])"))
    assert deltas["n2"] == ["5", "delta delta-grew"] and deltas["n3"] == ["0", "delta"]
    # the rollback's steps, and the hosts it put back
    assert page.js("Array.from(document.querySelectorAll('.rollback-steps li')).map(l => l.dataset.step)") == [
        s for s, rec in state.data["steps"].items() if s.startswith("rb1") and rec.get("ran") is not False]
    assert set(page.js("Array.from(document.querySelectorAll('table.hosts tr[data-state=\"rolled_back\"]'))"
                       ".map(r => r.dataset.host)")) == {"n2", "n3"}


def test_a_page_with_hosts_not_proven_names_them_and_never_says_passed(browser, tmp_path):
    """The lab facts judged against the lab baseline with its H100 group misspelt: the H100s are not proven."""
    from fabricproof.judging import catalog
    from fabricproof import facts as facts_mod
    from fabricproof.judging.baseline import Baseline
    from fabricproof.judging.baseline import load as load_baseline
    from fabricproof.judging.evaluate import evaluate

    from .fleet import LAB

    right = load_baseline(LAB / "baseline.yaml")
    typo = Baseline("typo", right.defaults, {("dgx_h10" if g == "dgx_h100" else g): v for g, v in right.groups.items()})
    facts = facts_mod.load_dir(LAB / "facts")
    report = evaluate(facts, typo, catalog.load(), groups={h: tuple(d["groups"]) for h, d in facts.items()})
    path, doc = _write(report, "validate-not-proven", tmp_path)
    page = browser.open(path)
    _assert_clean(page, path)
    _shot(page, "validate-not-proven")
    assert page.js("document.getElementById('verdict').dataset.status") == "not_proven"
    assert page.js("document.querySelector('#verdict .word').innerText") == "NOT PROVEN"
    rows = page.js("Array.from(document.querySelectorAll('tr.unproven')).map(r => [r.dataset.host, r.dataset.checks])")
    assert [(h, c.split()) for h, c in rows] == [(h, ids) for h, ids in doc["not_proven"].items()] == [
        ("h100-0001", doc["not_proven"]["h100-0001"])]
    # Its heatmap tile reads as a problem (amber cells, kept by "only hosts with problems"), never all green.
    tile = "document.querySelector('.t[data-host=\"h100-0001\"]')"
    assert page.js(f"{tile}.hasAttribute('data-ok')") is False
    assert "u" in page.js(f"Array.from({tile}.querySelectorAll('i')).map(i => i.className)")
    assert page.js("document.querySelector('.t[data-host=\"h200-0001\"]').hasAttribute('data-ok')") is True
