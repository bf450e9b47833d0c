"""A collective run as the report's `collective` section (pure): every test with its figure and outcome, the search's
path round by round, the suspects confirmed and with whom, and the verdict with its evidence chain and sentence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..words import counted
from .collective import Collective, Launch, threshold
from .isolation import SPINES, Decision, Finding, Verdict

#: A test's outcome: at or above the threshold, below it, within the noise band (run again), failed in the tool's
#: words, hung (or cancelled at its time limit), or not judged (the baseline sets no threshold for the scale).
OUTCOMES = ("pass", "slow", "borderline", "fail", "hang", "unjudged")
_RESULT = {"pass": "pass", "slow": "slow", "borderline": "borderline", "failed": "fail"}
_KINDS = ("host", "pair", "path")


def section(run: Collective, verdict: Verdict | None, stopped: str | None = None) -> dict[str, Any]:
    """The report's `collective` section of one run: its tests in order (round, group, figures, outcome) and, when
    the search ran, its path and verdict; `stopped` says why the run ended early."""
    limit = threshold(run.values, run.scale)
    decisions = _decisions(run.launches, verdict)
    tests = [_test(la, decisions.get(la.index), limit) for la in run.launches]
    return {"scale": run.scale, "launcher": run.launcher, "threshold_gbps": limit, "stopped": stopped,
            "sentence": sentence(tests, verdict, limit, stopped), "tests": tests,
            "search": None if verdict is None else _search(verdict)}


def _decisions(launches: Sequence[Launch], verdict: Verdict | None) -> dict[int, Decision]:
    """Launch index -> the search's decision on it: the search runs every test through the run, one launch each,
    in order; a launch whose group differs is left undecided rather than matched to another test's words."""
    if verdict is None:
        return {}
    return {d.index: d for d in verdict.decisions
            if d.index < len(launches) and launches[d.index].group == tuple(d.group)}


def _algbw(parsed: dict[str, Any] | None) -> float | None:
    """The algorithm bandwidth at the largest message size (nccl-tests averages only busbw): the lower of out-of-place
    and in-place, as the parser's headline busbw is."""
    rows = (parsed or {}).get("rows") or []
    if not rows:
        return None
    last = max(rows, key=lambda r: r["size_bytes"])
    cells = [g["algbw_gbps"] for g in (last.get("out_of_place"), last.get("in_place")) if g]
    return min(cells) if cells else None


def _test(la: Launch, decision: Decision | None, limit: float | None) -> dict[str, Any]:
    o = la.outcome
    if o is None or o.failure is not None:
        outcome = "hang" if o is not None and o.kind in ("hang", "timeout") else "fail"
    elif decision is not None:
        outcome = _RESULT[decision.result]
    elif limit is None:
        outcome = "unjudged"
    else:
        outcome = "pass" if o.figure is not None and o.figure >= limit else "slow"
    return {"index": la.index, "round": decision.round if decision is not None else la.round,
            "hosts": list(la.group), "references": list(decision.refs) if decision is not None else [],
            "busbw_gbps": None if o is None else o.figure, "algbw_gbps": _algbw(la.parsed), "threshold_gbps": limit,
            "outcome": outcome, "failure": "not run" if o is None else o.failure,
            "failure_kind": None if o is None or o.failure is None else o.kind,
            "why": decision.why if decision is not None else None, "seconds": round(la.seconds, 3),
            "evidence": str(la.evidence)}


def _search(verdict: Verdict) -> dict[str, Any]:
    rounds: dict[int, list[int]] = {}
    for d in verdict.decisions:
        rounds.setdefault(d.round, []).append(d.index)
    return {"state": verdict.state, "rounds": verdict.rounds, "tests": verdict.tests,
            "threshold_gbps": verdict.settings.threshold, "margin": verdict.settings.margin,
            "path": [{"round": r, "tests": ids} for r, ids in sorted(rounds.items())],
            "confirmations": [{"test": d.index, "round": d.round,
                               "suspects": [h for h in d.group if h not in d.refs], "partners": list(d.refs),
                               "outcome": _RESULT[d.result]} for d in verdict.decisions if d.refs],
            "findings": [{**f.to_dict(), "sentence": finding_sentence(f)} for f in _ordered(verdict.findings)],
            "hosts": list(verdict.hosts), "pairs": [list(p) for p in verdict.pairs],
            "paths": [list(p) for p in verdict.paths], "unresolved": list(verdict.unresolved)}


def _ordered(findings: Sequence[Finding]) -> list[Finding]:
    """Hosts first (what an operator drains), then pairs' cables, then the fabric's paths; else the search's order."""
    return sorted(findings, key=lambda f: _KINDS.index(f.kind))


def finding_sentence(f: Finding) -> str:
    """What one finding tells the operator: the host, the pair's cable or path, or the fabric between leaves."""
    if f.kind == "host":
        return f"{f.members[0]} is at fault: {f.why}"
    if f.kind == "pair":
        return f"{' and '.join(f.members)} are {f.why}: the cable or path between them"
    if f.members[-1] == SPINES:
        return f"the uplinks of leaf {f.members[0]} to the spines are slow: the fabric, not its hosts ({f.why})"
    return f"the path between leaves {' and '.join(f.members)} is slow: the fabric, not its hosts ({f.why})"


def sentence(tests: Sequence[dict[str, Any]], verdict: Verdict | None, limit: float | None,
             stopped: str | None = None) -> str:
    """The operator's sentence: what is at fault (or that nothing is), how the search got there, and whether the run
    stopped early."""
    parts = [f"The run stopped: {stopped}."] if stopped else []
    if verdict is not None:
        how = f"({counted(verdict.rounds, 'round')}, {counted(verdict.tests, 'test')})"
        named = "; ".join(finding_sentence(f) for f in _ordered(verdict.findings))
        if named:
            parts.append(f"{'T' + named[1:] if named.startswith('the ') else named} {how}.")
        elif verdict.state == "clear":
            parts.append(f"Every group reached the threshold: nothing is at fault {how}.")
        else:
            parts.append(f"The search could not narrow the slowness to a host, pair or path {how}.")
        if verdict.unresolved:
            parts.append(f"Not settled: {', '.join(verdict.unresolved)}.")
        return " ".join(parts)
    bad = [t for t in tests if t["outcome"] in ("slow", "fail", "hang")]
    if not tests:
        parts.append("No collective ran.")
    elif limit is None:
        parts.append(f"{counted(len(tests), 'group')} measured; the baseline sets no threshold for this scale.")
    elif bad:
        parts.append(f"{len(bad)} of {counted(len(tests), 'group')} below {limit:g} GB/s or failed: run with --search "
                     "to find the host(s), pair or path at fault.")
    else:
        parts.append(f"Every group reached {limit:g} GB/s.")
    return " ".join(parts)


__all__ = ["OUTCOMES", "finding_sentence", "section", "sentence"]
