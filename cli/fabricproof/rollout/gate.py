"""Gates: prove hosts against a baseline (collect, evaluate, report), retry until they pass or time runs out,
and judge a wave's failed hosts against its budget (plan.Budget documents the boundary)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..judging import pipeline
from ..judging.baseline import Baseline
from ..judging.catalog import Check
from ..judging.evaluate import failing_actions
from ..model import Outcome, Report, Result, Severity
from ..reporters._common import found_lines, not_proven_reason
from .plan import Budget

Facts = Mapping[str, Any]


@dataclass(frozen=True)
class Collected:
    """Facts per host, and the hosts that could not be collected with their reason."""

    facts: dict[str, dict[str, Any]]
    errors: dict[str, str] = field(default_factory=dict)


class Collect(Protocol):
    """Collects hosts into an evidence directory (raw/<host>/..., facts/<host>.json) and returns their facts."""

    def __call__(self, hosts: Sequence[str], evidence_dir: Path) -> Collected: ...


@dataclass(frozen=True)
class Proof:
    """One evaluation of some hosts: the report, who failed and why, and where its evidence lies."""

    report: Report
    failures: dict[str, list[str]]  # host -> reasons
    evidence: tuple[str, ...]  # report files and the evidence directory
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    actions: dict[str, str] = field(default_factory=dict)  # host -> its action, from the failures that fail it

    @property
    def passed(self) -> list[str]:
        return sorted(h for h in self.report.hosts if h not in self.failures)


@dataclass(frozen=True)
class GateResult:
    """The end of a gate: the last proof, how many attempts it took, and the hosts that failed."""

    name: str
    proof: Proof | None
    attempts: int
    failed: dict[str, str]  # host -> one-line reason
    passed: tuple[str, ...]
    stopped: bool = False  # interrupted by abort/signal before a verdict

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.proof.evidence if self.proof else ()

    @property
    def actions(self) -> dict[str, str]:
        """Failed host -> what its failed checks call for (the most disruptive); hosts failed only by what could
        not be judged or collected have none."""
        have = self.proof.actions if self.proof else {}
        return {h: have[h] for h in self.failed if h in have}


def host_failures(report: Report, fail_on: str = "critical") -> dict[str, list[str]]:
    """Host -> reasons it is not proven (pure). A host fails on a failed check at or above fail_on, and on a
    check it cannot be judged on at that severity (collector error, fact missing): an unproven host must not
    reach the next wave. Hosts that could not be collected fail with the transport's reason, and hosts not proven
(checks their hardware needs had no baseline value) with those checks."""
    threshold = Severity(fail_on).rank
    out: dict[str, list[str]] = {}
    for host, reason in report.collection_errors.items():
        out.setdefault(host, []).append(f"not collected: {reason}")
    for host, checks in report.not_proven.items():
        out.setdefault(host, []).append(f"not proven: {not_proven_reason(checks)}")
    for r in report.results:
        if r.host in report.collection_errors or r.severity.rank < threshold:
            continue
        if r.outcome is Outcome.FAIL:
            out.setdefault(r.host, []).append(f"{r.check_id}: {_found(r) or 'failed'}")
        elif r.outcome in (Outcome.ERROR, Outcome.UNKNOWN):
            out.setdefault(r.host, []).append(f"{r.check_id} could not be judged ({r.outcome.value}): {r.reason}")
    return out


def _found(r: Result) -> str:
    """What a failure found as operators read it: its failing items named ("GPU 1: 16 of 18 links active") rather
    than their pointers and raw arrays; a failure whose items have no name (a counter's growth) keeps its reason."""
    named = [f.line for f in r.findings if not f.line.startswith("/")]
    return "; ".join(found_lines(r)) if named and len(named) == len(r.findings) else r.reason


def summarize(reasons: Sequence[str], limit: int = 3) -> str:
    more = f" (+{len(reasons) - limit} more)" if len(reasons) > limit else ""
    return "; ".join(reasons[:limit]) + more


def prove(hosts: Sequence[str], baseline: Baseline, checks: Sequence[Check], collect: Collect, evidence_dir: Path, *,
          groups: Mapping[str, Sequence[str]] | None = None, previous: Mapping[str, Facts] | None = None,
          fail_on: str = "critical", formats: Sequence[str] = ("json",), run_id: str = "") -> Proof:
    """Collect hosts, evaluate them against the baseline, write the reports, and say who failed."""
    judged = pipeline.run(pipeline.Request(pipeline.Delegated(hosts, evidence_dir, collect), baseline, checks,
                                           groups=groups or {}, previous=previous, reports=formats, run_id=run_id))
    report = judged.report
    return Proof(report=report, failures=host_failures(report, fail_on),
                 evidence=(*map(str, judged.written.values()), str(evidence_dir)), facts=judged.facts,
                 actions=failing_actions(report, fail_on))


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def wait(seconds: float, clock: Clock, should_stop: Callable[[], bool], tick: float = 0.5) -> bool:
    """Sleep in short ticks so an abort is noticed; True when stopped early."""
    end = clock.monotonic() + seconds
    while True:
        if should_stop():
            return True
        left = end - clock.monotonic()
        if left <= 0:
            return False
        clock.sleep(min(tick, left))


def run_gate(name: str, hosts: Sequence[str], attempt: Callable[[int], Proof], *, retry_interval_s: float,
             timeout_s: float, clock: Clock | None = None, should_stop: Callable[[], bool] = lambda: False,
             on_attempt: Callable[[int, Proof], None] | None = None) -> GateResult:
    """Prove `hosts`, retrying every retry_interval_s until every host passes or timeout_s has passed since the
    first attempt began. A timeout of 0 means one attempt. Every attempt re-proves all hosts, so fleet checks
    always compare the same set, and the verdict is the last attempt's."""
    clock = clock or RealClock()
    start = clock.monotonic()
    n = 0
    proof: Proof | None = None
    while True:
        n += 1
        proof = attempt(n)
        if on_attempt:
            on_attempt(n, proof)
        if not proof.failures:
            break
        if clock.monotonic() - start + retry_interval_s > timeout_s:
            break
        if wait(retry_interval_s, clock, should_stop):
            return GateResult(name, proof, n, {h: summarize(r) for h, r in proof.failures.items()},
                              tuple(proof.passed), stopped=True)
    failed = {h: summarize(r) for h, r in proof.failures.items() if h in set(hosts)}
    return GateResult(name, proof, n, failed, tuple(h for h in hosts if h not in failed))


@dataclass(frozen=True)
class Verdict:
    """Whether a wave proceeds: its failed hosts (all gates together) against its budget."""

    proceed: bool
    failed: dict[str, str]
    total: int
    budget: Budget

    @property
    def why(self) -> str:
        n = len(self.failed)
        tolerated = self.budget.tolerated(self.total)
        if n == 0:
            return f"all {self.total} host(s) proven"
        verb = "within" if self.proceed else "over"
        return (f"{n} of {self.total} host(s) failed, {verb} the budget ({self.budget.describe()}: "
                f"{tolerated} tolerated)")


def judge(failed: Mapping[str, str], total: int, budget: Budget) -> Verdict:
    """Pure: a wave with these failed hosts proceeds iff the budget allows them."""
    return Verdict(budget.allows(len(failed), total), dict(failed), total, budget)
