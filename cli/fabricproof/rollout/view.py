"""A rollout run as one plain document for its report page: state, decisions, and what every gate attempt and soak
sample found, read from the run directory (read only: no format here is changed, nothing is written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model import Outcome
from ..reporters import rollout_html
from ..reporters._common import found_lines
from ..reporters.json_report import ReportFormatError, report_from_json
from ..runstore import RunStore
from . import decisions
from . import state as st
from . import store
from .gates import step_form
from .stepid import StepId


def step_words(kind: str, batch: str | None = None) -> str:
    """A step as an operator reads it: a gate's step as its gate kind names it ('post-gate'), the run's own steps
    as the page does ('apply (batch 2)' for w0.apply.b1)."""
    form = step_form(kind)
    return form.words if form is not None else rollout_html.step_words(kind, batch)


def _local(run_dir: Path, path: str) -> Path:
    """An evidence path as recorded (absolute when the run wrote it) inside this run directory, wherever it is now."""
    p = Path(path)
    parts = p.parts
    if run_dir.name in parts:  # recorded from another working directory, or the run was moved: re-root at its name
        return run_dir.joinpath(*parts[len(parts) - parts[::-1].index(run_dir.name):])
    return p if p.is_absolute() else run_dir / p


def _proofs(run_dir: Path, evidence: list[str]) -> list[dict[str, Any]]:
    """Every attempt (gate) or sample (soak) beside the one a step cites, in order, each summed up; then every other
    proof it cites (the one of hosts whose apply failed), by its directory's name."""
    reports = [p for p in (_local(run_dir, e) for e in evidence) if p == RunStore(p.parent).report_path]
    if not reports:
        return []
    stage = reports[0].parent.parent
    numbered = store.numbered(stage)
    out = [_summary(run_dir, n, RunStore(d).report_path) for n, d in numbered if RunStore(d).report_path.is_file()]
    seen = {d for _n, d in numbered}
    return out + [_summary(run_dir, r.parent.name, r) for r in dict.fromkeys(reports)
                  if r.parent not in seen and r.is_file()]


def _summary(run_dir: Path, n: int | str, path: Path) -> dict[str, Any]:
    try:
        report = report_from_json(path.read_text(encoding="utf-8"))
    except (OSError, ReportFormatError) as exc:
        return {"n": n, "report": str(path.relative_to(run_dir)), "error": f"unreadable report: {exc}"}
    failed: dict[str, list[str]] = {}
    deltas: dict[str, dict[str, Any]] = {}
    for r in report.results:
        if r.outcome is Outcome.FAIL:
            failed.setdefault(r.host, []).append(f"{r.check_id}: {'; '.join(found_lines(r, 3)) or r.reason}")
        if r.outcome in (Outcome.PASS, Outcome.FAIL) and isinstance(r.actual, int | float) and not isinstance(r.actual, bool):
            deltas.setdefault(r.host, {})[r.check_id] = r.actual
    hosts = sorted(set(report.hosts) | set(report.collection_errors))
    return {"n": n, "report": str(path.relative_to(run_dir)), "hosts": hosts, "failed": failed,
            "not_collected": dict(report.collection_errors), "figures": deltas,
            "passed": sorted(h for h in hosts if h not in failed and h not in report.collection_errors)}


def build(run_dir: Path) -> dict[str, Any]:
    """The document rollout_html renders: the run, its waves with their steps, every gate attempt and soak sample,
    the rollback, and the decision log."""
    state = st.RunState.load(run_dir)
    data = state.data
    run_dir = state.dir
    steps: list[dict[str, Any]] = []
    for sid, rec in data["steps"].items():
        if rec.get("ran") is False:  # begun and found nothing to do: not drawn, as it never ran
            continue
        m = StepId.parse(sid)
        m = m if m is not None and m.wave is not None else None
        step = {"id": sid, "rollback": (m.rollback_label if m else sid if sid.startswith("rb") else None),
                "wave": m.wave if m else None, "kind": m.kind if m else sid, "batch": m.batch_label if m else None,
                **{k: rec.get(k) for k in ("status", "started_at", "ended_at", "attempts", "failed", "duration_s",
                                           "decision", "why")}}
        form = step_form(step["kind"])
        step["words"] = step_words(step["kind"], step["batch"])
        step["section"] = form.section if form else None  # where the page shows its proofs, if anywhere
        if form is not None and form.section:
            step["proofs"] = _proofs(run_dir, [str(e) for e in rec.get("evidence", [])])
        steps.append(step)
    log = decisions.read_log(run_dir)
    return {
        "run": {k: data.get(k) for k in ("run_id", "plan", "plan_file", "inventory", "status", "exit_code",
                                         "created_at", "updated_at", "created_by", "phase")},
        "on_failure": data.get("settings", {}).get("on_failure", ""),
        "waves": [{k: w.get(k) for k in ("index", "name", "hosts", "batches", "max_failed_hosts",
                                         "max_failed_percent", "soak_s", "pause")} for w in data["waves"]],
        "hosts": data["hosts"],
        "steps": steps,
        "rollback": data.get("rollback"),
        "decisions": log.records,
        "decision_log": {"unreadable": [u.as_dict() for u in log.unreadable], "set_aside": log.set_aside},
        "verdicts": [decisions.PROCEED, decisions.ROLLBACK, decisions.HALT],
    }
