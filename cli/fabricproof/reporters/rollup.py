"""A fleet's results rolled up for people: failures by check and by cause, unjudged checks by the cause they share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..judging.findings import CAUSE_ORDER, cause_rank
from ..model import Outcome, Report, Result, Severity
from ..words import counted
from ._common import failures, found_lines, not_verified

#: Above this many hosts the terminal report rolls up by check; at or below it, it lists every host.
ROLLUP_HOSTS = 32
#: Hosts named per check or per cause in a rolled-up view; the JSON report and --hosts have every one.
MAX_HOSTS_SHOWN = 10


@dataclass(frozen=True)
class Cause:
    """One failure and those that follow from it on the same items of the same host (a port Disabled, so Down and at
    rate 10, is one cause with two consequences)."""

    result: Result
    consequences: tuple[Result, ...] = ()


def _holders(r: Result) -> frozenset[str]:
    """The objects in the facts whose fields failed (/ib/ibstat/ports/2 for its state, phys_state and rate)."""
    return frozenset(f.pointer.rsplit("/", 1)[0] for f in r.findings)


def _rank(r: Result) -> int:
    return min((cause_rank(f) for f in r.findings), default=len(CAUSE_ORDER))


def causes(fails: Iterable[Result]) -> list[Cause]:
    """Failures as causes, in the order given (worst first). On one host, a failure is listed under another as its
    consequence when every object it failed on is one the other failed on and the other's field comes first in
    findings.CAUSE_ORDER (a port's physical state before its logical state before its rate); unrelated fields of one
    GPU (its ECC mode, its power limit) stay apart."""
    fails = list(fails)
    by_host: dict[str, list[Result]] = {}
    for r in fails:
        by_host.setdefault(r.host, []).append(r)
    heads: dict[int, list[Result]] = {}  # id of a head result -> its consequences
    absorbed: set[int] = set()
    for results in by_host.values():
        if len(results) < 2:
            continue
        kept: list[Result] = []
        for r in sorted((r for r in results if r.findings), key=lambda r: (_rank(r), -r.severity.rank, r.check_id)):
            head = next((h for h in kept if _rank(h) < min(_rank(r), len(CAUSE_ORDER)) and _holders(r) <= _holders(h)),
                        None)
            if head is None:
                kept.append(r)
            else:
                heads.setdefault(id(head), []).append(r)
                absorbed.add(id(r))
    return [Cause(r, tuple(heads.get(id(r), ()))) for r in fails if id(r) not in absorbed]


def consequence_line(c: Cause) -> str:
    """The failures that follow from a cause, as one line: "ib.port_active (state Down, not Active), ib.rate (...)"."""
    return ", ".join(f"{r.check_id} ({'; '.join(_texts(r))})" if _texts(r) else r.check_id for r in c.consequences)


def _texts(r: Result) -> list[str]:
    return [f.text for f in r.findings[:3]] or found_lines(r, 3)


@dataclass(frozen=True)
class CheckFailures:
    """One failing check across the fleet: its causes grouped by what was expected, and the hosts where it failed only
    as another failure's consequence."""

    check_id: str
    severity: Severity
    action: str
    remediation: str
    by_expected: dict[str, list[Cause]]
    hosts: int  # hosts it failed on, as a cause or a consequence
    as_consequence: tuple[str, ...] = ()  # the checks it followed from where it is not a cause itself


def by_check(report: Report) -> list[CheckFailures]:
    """Every failing check, worst first, each with its causes; a check failing only as a consequence is listed too
    (with no hosts of its own) so no failing id disappears from the roll-up."""
    found = causes(failures(report))
    groups: dict[str, list[Cause]] = {}
    hosts: dict[str, set[str]] = {}
    led_by: dict[str, set[str]] = {}
    first: dict[str, Result] = {}
    for c in found:
        groups.setdefault(c.result.check_id, []).append(c)
        for r in (c.result, *c.consequences):
            first.setdefault(r.check_id, r)
            hosts.setdefault(r.check_id, set()).add(r.host)
        for r in c.consequences:
            led_by.setdefault(r.check_id, set()).add(c.result.check_id)
    out = []
    for check_id, r in sorted(first.items(), key=lambda kv: (-kv[1].severity.rank, kv[0])):
        by_expected: dict[str, list[Cause]] = {}
        for c in groups.get(check_id, ()):
            by_expected.setdefault(c.result.expected, []).append(c)
        out.append(CheckFailures(check_id, r.severity, r.action, r.remediation, by_expected, len(hosts[check_id]),
                                 tuple(sorted(led_by.get(check_id, ())))))
    return out


@dataclass(frozen=True)
class Unjudged:
    """Checks left unjudged for one reason (a tool that timed out, a host not collected), on every host it hit."""

    outcome: Outcome
    reason: str
    hosts: tuple[str, ...]
    checks: tuple[str, ...]
    count: int  # results left unjudged (not every host need miss every check)


def unjudged(report: Report) -> list[Unjudged]:
    """not_verified results grouped by reason: one hung nvidia-smi is one line naming the checks it left unjudged."""
    groups: dict[tuple[Outcome, str], tuple[dict[str, None], dict[str, None], list[int]]] = {}
    for r in not_verified(report):
        hosts, checks, n = groups.setdefault((r.outcome, r.reason), ({}, {}, [0]))
        hosts[r.host] = None
        checks[r.check_id] = None
        n[0] += 1
    return [Unjudged(outcome, reason, tuple(hosts), tuple(checks), n[0])
            for (outcome, reason), (hosts, checks, n) in groups.items()]


def named(names: Iterable[str], limit: int = MAX_HOSTS_SHOWN) -> str:
    """Names as one list, cut after `limit` with how many more: "a, b, c (+7 more)"."""
    names = list(names)
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def left_unjudged(u: Unjudged, limit: int = MAX_HOSTS_SHOWN) -> str:
    """What one reason left unjudged, every check named: "on 2 hosts (a, b): 17 checks unjudged: gpu.x, gpu.y, ..."."""
    return (f"on {counted(len(u.hosts), 'host')} ({named(u.hosts, limit)}): "
            f"{counted(len(u.checks), 'check')} unjudged: {', '.join(u.checks)}")


def grouped(rows: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, ...], str]]:
    """(name, reason) pairs as (names, reason) with one row per reason, in order of first appearance: forty hosts
    unreachable for one reason are one row."""
    out: dict[str, list[str]] = {}
    for name, reason in rows:
        out.setdefault(reason, []).append(name)
    return [(tuple(names), reason) for reason, names in out.items()]
