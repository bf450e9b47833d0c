"""The rollout page tells the truth, checked in headless Chromium against the decision log of a rolled-back, a
halted and a completed run (the executor on the fake fleet): a step is drawn when, and only when, the log records it
doing something; each gate shows its attempts on disk and the hosts it failed with what they found."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabricproof.reporters import rollout_html
from fabricproof.reporters.rollout_html import BOOKKEEPING
from fabricproof.rollout import decisions, view
from fabricproof.rollout import state as st
from fabricproof.rollout.stepid import StepId

from .test_pages import _assert_clean, _shot, browser  # noqa: F401 - fixture

#: (name, fleet faults, plan policy, exit code): the pilot's apply fails and it rolls back (its post-gate proves it
#: once, its soak has no host left); the pilot's new version does not prove and the policy halts; all is well.
RUNS = [("rolled-back", {"apply_fails": {"n1"}}, "rollback_wave", 4), ("halted", {"breaks": {"n1"}}, "halt", 1),
        ("completed", {}, "rollback_wave", 0)]


def _run(tmp_path: Path, monkeypatch, faults: dict, policy: str) -> Path:
    from fabricproof import inventory as inventory_mod
    from fabricproof.inventory import from_list_json
    from fabricproof.judging import catalog as catalog_mod
    from rollout.fakes import ERRORS_CHECK, VERSION_CHECK, Fleet
    from rollout.test_executor import HOSTS, THREE, start, write_plan

    inv = from_list_json({"_meta": {"hostvars": {h: {} for h in HOSTS}}, "gpu": {"hosts": HOSTS}}, "inv.yml")
    monkeypatch.setattr(inventory_mod, "load", lambda _path: inv)
    monkeypatch.setattr(catalog_mod, "load", lambda *a, **k: [VERSION_CHECK, ERRORS_CHECK])
    code, run_id = start(tmp_path, Fleet(HOSTS, **faults), write_plan(tmp_path, THREE, policy=policy))
    return code, tmp_path / "runs" / run_id


def _recorded_steps(log: list[dict]) -> set[str]:
    """The steps of waves and rollbacks the decision log records doing something (boundaries aside)."""
    out = set()
    for d in log:
        sid = StepId.parse(d.get("step") or "")
        if sid is not None and sid.wave is not None and sid.kind not in BOOKKEEPING:
            out.add(str(sid))
    return out


@pytest.mark.parametrize(("name", "faults", "policy", "code"), RUNS, ids=[r[0] for r in RUNS])
def test_the_page_draws_what_the_decision_log_records(browser, tmp_path, monkeypatch, name, faults, policy, code):
    got, run_dir = _run(tmp_path, monkeypatch, faults, policy)
    assert got == code
    out = tmp_path / "rollout.html"
    out.write_text(rollout_html.render(view.build(run_dir)), encoding="utf-8")
    page = browser.open(out, height=1600)
    _assert_clean(page, out)
    _shot(page, f"rollout-{name}")
    log = decisions.read(run_dir)
    state = st.RunState.load(run_dir)
    assert page.js("document.getElementById('verdict').dataset.status") == state.status
    # a bar for every step the log records doing something, and for nothing else (no step that never ran)
    bars = page.js("Array.from(document.querySelectorAll('.bar')).map(b => b.dataset.step)")
    assert len(bars) == len(set(bars)) and set(bars) == _recorded_steps(log)
    # each gate: its attempts as the run directory holds them, and the hosts it failed as its records name them
    gates = {a[0]: a[1:] for a in page.js(
        "Array.from(document.querySelectorAll('article.gate')).map(a => [a.dataset.step, Number(a.dataset.attempts),"
        " a.dataset.failed, Array.from(a.querySelectorAll('tr[data-attempt]')).map(r => r.innerText).join('\\n')])")}
    assert set(gates) == {s for s in _recorded_steps(log) if StepId.parse(s).kind in ("pre_gate", "post_gate", "gate")}
    for sid, (attempts, failed, rows) in gates.items():
        evidence = [Path(e) for e in state.step(sid).get("evidence", []) if e.endswith("report.json")]
        stage = evidence[0].parent.parent
        on_disk = {p.parent for p in stage.glob("*/report.json")} | {p.parent for p in evidence}
        assert attempts == len(on_disk), sid
        if StepId.parse(sid).kind != "gate":  # the rollback gate's record names the hosts it put back, not failures
            named = {h for d in log if d.get("step") == sid and d["what"] in ("PRE_GATE", "POST_GATE")
                     for h in d["hosts"]}
            assert set(filter(None, failed.split(","))) == named, sid
            for h in named:  # each failed host with what it found: the check that failed it
                assert h in rows and "t.version" in rows, (sid, rows)
    soaks = page.js("Array.from(document.querySelectorAll('article.soak')).map(a => a.dataset.step)")
    assert set(soaks) == {s for s in _recorded_steps(log) if s.endswith(".soak")}
