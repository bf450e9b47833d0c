"""The collective gate's decision (pure): a wave's hosts, with hosts already proven, run one collective before and
after the change; a drop beyond the tolerance fails the wave, and the search over the group names the host to roll
back first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...probes.isolation import Outcome, Verdict

#: search(hosts, threshold) -> the verdict over the group after the change, judged against `threshold`.
Search = Callable[[Sequence[str], float], Verdict]


def group(wave: Sequence[str], proven: Sequence[str], count: int) -> list[str]:
    """The wave's hosts and up to `count` hosts already proven (changed in an earlier wave, or not changed and
    passing): with them a change that slows only the new hosts' traffic to the rest shows too."""
    extra = [h for h in proven if h not in set(wave)][:count]
    return [*wave, *extra]


@dataclass(frozen=True)
class Decision:
    """The gate's verdict on a wave: pass or not and why, both figures, the hosts to roll back first (the wave's
    hosts the search named, in its order) and proven hosts it named (never rolled back by this wave)."""

    passed: bool
    why: str
    before: Outcome
    after: Outcome
    roll_back_first: tuple[str, ...] = ()
    proven_at_fault: tuple[str, ...] = ()
    verdict: Verdict | None = None

    def to_record(self) -> dict[str, Any]:
        """What the decision log keeps: the figures or failures, the hosts named, and the search's path."""
        return {"passed": self.passed, "why": self.why, "before": _outcome(self.before), "after": _outcome(self.after),
                "roll_back_first": list(self.roll_back_first), "proven_at_fault": list(self.proven_at_fault),
                "search": None if self.verdict is None else self.verdict.to_facts()}


def _outcome(o: Outcome) -> dict[str, Any]:
    return {"figure": o.figure, "failure": o.failure, "failure_kind": None if o.failure is None else o.kind}


def decide(wave: Sequence[str], hosts: Sequence[str], before: Outcome, after: Outcome, tolerance_pct: float,
           search: Search) -> Decision:
    """The wave passes when the collective after the change reaches its figure before, less the tolerance. When it
    does not (slower, or failed), the search over the same hosts, against that floor, names what is at fault."""
    if before.figure is None:
        return Decision(False, f"the collective failed before the change ({before.failure}): nothing to compare "
                               "with; the wave is not proven", before, after)
    floor = before.figure * (1.0 - tolerance_pct / 100.0)
    if after.figure is not None and after.figure >= floor:
        return Decision(True, f"{after.figure:g} GB/s after the change, {before.figure:g} before (tolerance "
                              f"{tolerance_pct:g}%)", before, after)
    what = (f"{after.figure:g} GB/s after the change, below {floor:g} ({before.figure:g} before, tolerance "
            f"{tolerance_pct:g}%)" if after.figure is not None else f"the collective failed after the change "
            f"({after.failure})")
    verdict = search(hosts, floor)
    in_wave = set(wave)
    named = [m for f in verdict.findings if f.kind == "host" for m in f.members]
    named += [m for f in verdict.findings if f.kind == "pair" for m in f.members if m not in named]
    first = tuple(h for h in named if h in in_wave)
    proven = tuple(h for h in named if h not in in_wave)
    if first:
        why = f"{what}; the search names {', '.join(first)}: roll back first"
    else:
        why = f"{what}; the search named no host of the wave ({verdict.state}): the whole wave rolls back"
    if proven:
        why += f"; also at fault, not changed by this wave: {', '.join(proven)}"
    return Decision(False, why, before, after, first, proven, verdict)
