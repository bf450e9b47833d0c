"""Soak: snapshot error counters, re-read them over a window, and fail hosts whose counters grew beyond budget.

The counter checks are the catalog's delta_le checks (nvlink.crc_errors, ib.link_downed, ...); they
compare each read with the snapshot taken when the soak began, through evaluate(previous=...).
A host that grows fails at once: the soak stops early instead of waiting out the window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..judging import pipeline
from ..judging.baseline import Baseline
from ..judging.catalog import Check
from . import store
from .gate import Clock, Collect, GateResult, Proof, RealClock, prove, summarize, wait


def sample_times(duration_s: int, interval_s: int | None) -> list[int]:
    """Offsets (seconds after the first snapshot) of every re-read: each interval, and always the end. Pure."""
    if duration_s <= 0:
        return [0]
    if not interval_s or interval_s >= duration_s:
        return [duration_s]
    times = list(range(interval_s, duration_s, interval_s))
    return times + [duration_s]


def run_soak(hosts: Sequence[str], baseline: Baseline, checks: Sequence[Check], collect: Collect, evidence_dir: Path,
             *, duration_s: int, interval_s: int | None, groups: dict[str, Sequence[str]] | None = None,
             fail_on: str = "critical", formats: Sequence[str] = ("json",), run_id: str = "",
             clock: Clock | None = None, should_stop: Callable[[], bool] = lambda: False,
             on_sample: Callable[[int, Proof], None] | None = None) -> GateResult:
    """Snapshot, then re-read at each sample time; the verdict is the first sample with growth, else the last."""
    clock = clock or RealClock()
    snapshot = pipeline.gather(pipeline.Delegated(hosts, store.soak_start_dir(evidence_dir), collect))
    failed_start = {h: f"not collected at soak start: {e}" for h, e in snapshot.errors.items()}
    previous = snapshot.facts
    begun = clock.monotonic()
    proof: Proof | None = None
    n = 0
    for offset in sample_times(duration_s, interval_s):
        if wait(max(0.0, begun + offset - clock.monotonic()), clock, should_stop):
            failed = dict(failed_start)
            return GateResult("soak", proof, n, failed, tuple(h for h in hosts if h not in failed), stopped=True)
        n += 1
        proof = prove(hosts, baseline, checks, collect, store.sample_dir(evidence_dir, n), groups=groups,
                      previous=previous, fail_on=fail_on, formats=formats, run_id=run_id)
        if on_sample:
            on_sample(n, proof)
        if proof.failures:
            break
    assert proof is not None
    failed = {**{h: summarize(r) for h, r in proof.failures.items()}, **failed_start}
    return GateResult("soak", proof, n, failed, tuple(h for h in hosts if h not in failed))
