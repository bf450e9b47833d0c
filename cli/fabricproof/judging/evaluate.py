"""Pure evaluation: (facts per host, baseline, catalog, inventory groups) -> results. No I/O."""

from __future__ import annotations

import fnmatch
import threading
from array import array
from collections import Counter
from bisect import insort
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain
from dataclasses import replace
from typing import Any

from .baseline import UNSET, Baseline, lookup
from .catalog import Applicability, Check
from .findings import counted_findings, counted_reasons, fact_words, name_findings, value_words
from .packing import FirstPlaceCounts, Records, Spill, Spilled, Tuples, made_result, reasons_in_order, shared
from ..model import CheckCoverage, Finding, Outcome, Report, Result, Scope
from .ops import OPERATORS, render_value
from .pointer import Found, Where, resolve, split_pointer
from .pointer import values as values_at

Facts = Mapping[str, Any]
_MAX_LISTED = 8


class _Missing(Exception):
    pass


def _fmt_path(path: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(p) for p in path)


class _Evaluator:
    def __init__(self, baseline: Baseline, groups: Mapping[str, Iterable[str]], previous: Mapping[str, Facts] | None):
        self.baseline = baseline
        self.groups = {h: tuple(g) for h, g in groups.items()}
        self.previous = previous
        self._values_cache: dict[tuple[str, ...], dict[str, Any]] = {}
        self._sentences: dict[tuple[str, str, str], str] = {}
        self.gaps: dict[tuple[str, int], str | None] = {}  # (check, values) -> the baseline key it lacks (_gap)
        self._applicable: dict[tuple[str, int], str | None] = {}  # (check, values) -> why it does not apply
        self._walked: dict[tuple[str, ...], tuple[list[Any], bool]] | None = None  # the host being added: walk()
        self._expectations: dict[tuple[str, int], tuple[Any, ...]] = {}  # (check, values) -> expectation()
        self._reads_facts: dict[str, bool] = {}  # check -> _reads_facts

    def walk(self, facts: Facts, segs: tuple[str, ...], where: Where = ()) -> tuple[list[Any], bool]:
        """pointer.values, read once per host and pointer while a host is added (one_host): a dozen checks apply
        only where the same fact holds (GPUs in an NVLink fabric, NVSwitches present). The lists are shared: read,
        never changed."""
        walked = self._walked
        if walked is None or where:
            return values_at(facts, segs, where)
        got = walked.get(segs)
        if got is None:
            got = walked[segs] = values_at(facts, segs)
        return got

    @contextmanager
    def one_host(self) -> Iterator[None]:
        """The span in which every walk() reads the same host's facts."""
        self._walked = {}
        try:
            yield
        finally:
            self._walked = None

    def values_for(self, host: str, facts: Facts) -> dict[str, Any]:
        groups = self.groups.get(host) or tuple(facts.get("groups", ()))
        key = tuple(sorted(groups))
        v = self._values_cache.get(key)
        if v is None:
            v = self._values_cache[key] = self.baseline.for_groups(key)
        return v

    def applicability(self, check: Check, values: dict[str, Any]) -> str | None:
        """_applicability memoised per group set (values are the cached dict of one): the same for all its hosts."""
        memo = (check.id, id(values))
        if memo not in self._applicable:
            self._applicable[memo] = _applicability(check, values)
        return self._applicable[memo]

    def gap(self, check: Check, values: dict[str, Any]) -> str | None:
        """_gap memoised per group set (values are the cached dict of one): the same for all its hosts."""
        memo = (check.id, id(values))
        if memo not in self.gaps:
            self.gaps[memo] = _gap(check, values)
        return self.gaps[memo]

    def sentence(self, check: Check, expected: Any, source: str) -> str:
        """sentence() memoised: every host of a group shares the same expectation text."""
        key = (check.id, "" if expected is UNSET else repr(expected), source)
        text = self._sentences.get(key)
        if text is None:
            text = self._sentences[key] = sentence(check, expected, source)
        return text

    def plain(self, check: Check) -> str:
        """sentence(check) memoised: the expectation of results judged before a value is known (skips)."""
        return self.sentence(check, UNSET, "")

    # -- expectation ------------------------------------------------------------------
    def expectation(self, check: Check, values: dict[str, Any], facts: Facts) -> tuple[Any, str, Where, str]:
        """(expected value, its source note, the where filters, the sentence) of a host check. Unless the check
        compares with the host's own facts, all of it follows from the group set's values alone, so it is made once
        per group set (values are its cached dict), not once per host. Raises _Skip / _Missing."""
        reads = self._reads_facts.get(check.id)
        if reads is None:
            reads = self._reads_facts[check.id] = _reads_facts(check)
        memo = None if reads else (check.id, id(values))
        known = self._expectations.get(memo) if memo else None
        if known is not None:
            if len(known) == 1:
                raise _Skip(known[0])  # a new exception each time: one raised again keeps every traceback
            return known  # type: ignore[return-value]
        try:
            expected, source = (None, "") if OPERATORS[check.op].fleet else self.expected(check.expected, values, facts)
            where = _where(check, values, facts, self)
        except _Skip as exc:
            if memo:
                self._expectations[memo] = (str(exc),)
            raise
        made = (expected, source, where, self.sentence(check, expected, source))
        if memo:
            self._expectations[memo] = made
        return made

    def expected(self, spec: Any, values: dict[str, Any], facts: Facts) -> tuple[Any, str]:
        """(value, source note). Raises _Skip / _Missing."""
        if isinstance(spec, dict) and "baseline" in spec:
            v = lookup(values, spec["baseline"])
            if v is UNSET:
                raise _Skip(f"baseline sets no {spec['baseline']}")
            return v, f" (baseline {spec['baseline']})"
        if isinstance(spec, dict) and "fact" in spec:
            vals, _ = self.walk(facts, split_pointer(spec["fact"]))
            if not vals or vals[0] is None:
                raise _Missing(f"fact {spec['fact']} (the expected value) is missing")
            return vals[0], f" (this host's {fact_words(spec['fact'])})"
        return spec, ""


class _Skip(Exception):
    pass


def sentence(check: Check, expected: Any = UNSET, source: str = "", technical: bool = False) -> str:
    """The expectation of a check as an operator reads it, e.g. "each GPU's active NVLink count should be 18 (baseline
    nvlink.links_per_gpu)": the subject names what is judged, so the item filters and fact pointers stay out;
    technical: as the check is written, filters and pointers included (`checks show`)."""
    exp = value_words(expected) if expected is not UNSET else _spec_text(check.expected, technical)
    where = ""
    if check.where and technical:
        where = " where " + " and ".join(
            f"{'/'.join(c.path)} {OPERATORS[c.op].condition} {_spec_text(c.expected, technical)}" for c in check.where
        )
    if check.op == "same":
        scope = f"each {check.partition} group" if check.partition else "the same platform"
        return f"{check.subject}{where} should be identical on every host of {scope}"
    if check.op == "unique":
        scope = f"each {check.partition} group" if check.partition else "the fleet"
        return f"{check.subject}{where} should belong to one host only across {scope}, each value once"
    if check.op == "count":
        return f"the number of {check.subject}{where} should {OPERATORS[check.compare or 'eq'].verb} {exp}{source}"
    if check.op == "delta_le":
        return f"{check.subject}{where} should grow by at most {exp} between two snapshots{source}"
    quant = "at least one of " if check.quantifier == "any" else ""
    return f"{quant}{check.subject}{where} should {OPERATORS[check.op].verb} {exp}{source}"


def _spec_text(spec: Any, technical: bool = False) -> str:
    if isinstance(spec, dict) and "baseline" in spec:
        return f"the baseline's {spec['baseline']}"
    if isinstance(spec, dict) and "fact" in spec:
        return f"this host's {spec['fact'] if technical else fact_words(spec['fact'])}"
    return render_value(spec) if technical else value_words(spec)


def _evidence(facts: Facts, check: Check, tuples: Tuples | None = None) -> tuple[str, ...]:
    """The raw output a check's verdict rests on (as one of the host's `tuples` when given)."""
    run = facts.get("collectors", {}).get(check.collector) or {}
    ev = run.get("evidence")
    if not ev:
        return ()
    return (ev,) if tuples is None else tuples.of(ev)


def _noted(facts: Facts, check: Check, reason: str) -> str:
    """A reason for an unjudged fact, with the first thing the collector's parser noted (a malformed table)."""
    notes = (facts.get("collectors", {}).get(check.collector) or {}).get("notes")
    return f"{reason}; {check.collector} noted: {notes[0]}" if notes else reason


def _collector_problem(facts: Facts, check: Check) -> tuple[Outcome, str] | None:
    run = facts.get("collectors", {}).get(check.collector)
    if run is None and check.probe:  # probes are opt-in: a collection without this one proves nothing either way
        if check.family == "subnet":  # so is the fabric plan: the subnet.* checks judge its diff
            return Outcome.SKIP, "no fabric plan was diffed for this host (--fabric-plan)"
        return Outcome.SKIP, f"probe {check.collector} was not run on this host"
    if run is None:
        return Outcome.UNKNOWN, f"collector {check.collector} did not run on this host"
    status = run.get("status")
    if status == "error":
        return Outcome.ERROR, f"collector {check.collector} failed: {run.get('error', 'no reason given')}"
    if status == "skipped":
        # Not run on purpose (prerequisite absent, platform not served): the check does not apply here.
        return Outcome.SKIP, f"collector {check.collector} not run: {run.get('error', '')}".rstrip(": ")
    return None


def _where(check: Check, values: dict[str, Any], facts: Facts, ev: _Evaluator) -> Where:
    out = []
    for c in check.where:
        exp, _ = ev.expected(c.expected, values, facts)
        out.append((c.path, OPERATORS[c.op].test, exp))
    return tuple(out)


def _reads_facts(check: Check) -> bool:
    """Whether a check's expected value or a `where` filter's comes from the host's own facts."""
    return any(isinstance(spec, dict) and "fact" in spec for spec in (check.expected, *(c.expected for c in check.where)))


def _applicability(check: Check, values: dict[str, Any]) -> str | None:
    platform = values.get("platform")
    if check.platforms and platform and platform not in check.platforms:
        return f"not applicable to platform {platform} (applies to {', '.join(check.platforms)})"
    for key in check.requires:
        v = lookup(values, key)
        if v is UNSET or v is None:
            return f"baseline sets no {key}"
        if v is False:
            return f"baseline sets {key}: false"
    return None


def _not_applicable(check: Check, values: dict[str, Any], facts: Facts, ev: _Evaluator,
                    conditions: Iterable[Applicability] | None = None) -> str | None:
    """The reason the host's own facts put it outside the check (applies_when, or just `conditions`), or None.

    A condition holds when any value at its pointer satisfies it; a pointer the facts do not reach (the
    collector did not run or failed) proves nothing, so the check is judged as usual. Raises _Skip."""
    for cond in check.applies_when if conditions is None else conditions:
        vals, missing = ev.walk(facts, split_pointer(cond.fact))
        if not vals and missing:
            continue
        expected, _ = ev.expected(cond.expected, values, facts)
        test = OPERATORS[cond.op].test
        if any(test(v, expected) for v in vals):
            continue
        shown = value_words(vals[0] if len(vals) == 1 else _compact(vals)) if vals else "nothing"
        return f"not applicable: {cond.reason} ({fact_words(cond.fact)} is {shown})"  # in words, no pointer
    return None


def _literal(spec: Any) -> bool:
    """An expected value written in the check itself, not read from the baseline or the host's facts."""
    return not (isinstance(spec, dict) and ("baseline" in spec or "fact" in spec))


def _wanting(check: Check, values: dict[str, Any], facts: Facts, ev: _Evaluator) -> str | None:
    """The baseline value a skipped check lacked on a host that has what it judges, or None: such a host is
    not proven (a misspelt group leaves an NVSwitch system's FM and fabric checks, an IB host's port checks,
    without their values).

    Decided from the check and the host's facts, not from a list: the host has what a check judges when the
    check's collector ran there, its fact holds a value on the items its literal `where` conditions pick, and
    its literal applies_when conditions hold (NVSwitches present for fm.*, a GPU registered in an NVLink
    fabric for fabric.*). Decisions are not gaps: a key the baseline sets to false, another platform, and an
    opt-in check (one that `requires` the very value it compares, as roce.gid_index does: a baseline without
    it does not pin a GID index) left unset. A probe is opt-in and compared across the fleet without a threshold."""
    unset = ev.gap(check, values)
    if unset is None or _collector_problem(facts, check):
        return None
    where = tuple((c.path, OPERATORS[c.op].test, c.expected) for c in check.where if _literal(c.expected))
    vals, _ = values_at(facts, split_pointer(check.fact), where)
    if all(v is None for v in vals):
        return None
    literal = [c for c in check.applies_when if _literal(c.expected)]
    try:
        if _not_applicable(check, values, facts, ev, literal):
            return None
    except (_Skip, _Missing):
        return None
    return unset


def _gap(check: Check, values: dict[str, Any]) -> str | None:
    """The first baseline key the check reads that these values leave unset, unless leaving it is a decision."""
    if check.probe:
        return None
    platform = values.get("platform")
    if check.platforms and platform and platform not in check.platforms:
        return None
    if any(lookup(values, k) is False for k in check.requires):
        return None
    unset = [k for k in check.baseline_keys if lookup(values, k) is UNSET or lookup(values, k) is None]
    compared = check.expected.get("baseline") if isinstance(check.expected, dict) else None
    if not unset or (compared in check.requires and compared in unset):
        return None
    return unset[0]


def _unproven(result: Result, check: Check, key: str) -> Result:
    return replace(result, reason=shared(f"not proven: baseline sets no {key}, and this host has what the "
                                         f"check judges ({check.fact})"))


def _result(check: Check, host: str, outcome: Outcome, expected: str, actual: Any = None, reason: str = "",
            evidence: tuple[str, ...] = (), findings: tuple[Finding, ...] = ()) -> Result:
    # made_result takes Result's fields in their order: check_id, title, host, outcome, severity, expected, actual,
    # reason, remediation, evidence, family, references, findings, action
    return made_result(check.id, check.title, host, outcome, check.severity, expected, actual, shared(reason),
                       check.remediation if outcome is Outcome.FAIL else "", evidence, check.family, check.references,
                       findings, check.action)


def _judge_host(check: Check, host: str, facts: Facts, ev: _Evaluator,
                tuples: Tuples | None = None, values: dict[str, Any] | None = None) -> Result:
    values = ev.values_for(host, facts) if values is None else values
    skip = ev.applicability(check, values)
    if skip:
        return _result(check, host, Outcome.SKIP, ev.plain(check), reason=skip)
    problem = _collector_problem(facts, check)
    if problem:
        return _result(check, host, problem[0], ev.plain(check), reason=problem[1])
    evidence = _evidence(facts, check, tuples)
    try:
        outside = _not_applicable(check, values, facts, ev)
        if outside:
            return _result(check, host, Outcome.SKIP, ev.plain(check), reason=outside, evidence=evidence)
        expected, source, where, text = ev.expectation(check, values, facts)
    except _Skip as exc:
        return _result(check, host, Outcome.SKIP, ev.plain(check), reason=str(exc))
    except _Missing as exc:
        return _result(check, host, Outcome.UNKNOWN, ev.plain(check), reason=str(exc), evidence=evidence)
    segs = split_pointer(check.fact)

    if check.op == "delta_le":
        if (ev.previous or {}).get(host) is None:
            return _result(check, host, Outcome.SKIP, text, reason="needs two snapshots (a soak window or --previous)")
        found, _ = resolve(facts, segs, where)
        return _judge_delta(check, host, facts, found, expected, text, evidence, ev, where)

    vals, missing = ev.walk(facts, segs, where)
    if check.op == "count":
        n = sum(1 for v in vals if v is not None)
        if not vals and missing:  # a list the host did not report is not an empty list
            return _result(check, host, Outcome.UNKNOWN, text, reason=_noted(facts, check, f"fact {check.fact} is missing"),
                           evidence=evidence)
        ok = OPERATORS[check.compare or "eq"].test(n, expected)
        named = () if ok or not check.finding else counted_findings(resolve(facts, segs, where)[0], expected,
                                                                    check.finding)  # the bridges with ACS on
        return _result(check, host, Outcome.PASS if ok else Outcome.FAIL, text, actual=n,
                       reason="" if ok else f"counted {n}", evidence=evidence, findings=named)

    judged = vals if expected is None and check.op in ("eq", "ne") else [v for v in vals if v is not None]
    if not judged:
        if vals or not missing:
            if check.allow_empty and not vals:
                return _result(check, host, Outcome.PASS, text, actual=[], evidence=evidence)
            what = "reported no value" if vals else "yields no values"
            reason = f"{check.fact} {what}"
            return _result(check, host, Outcome.UNKNOWN if vals else Outcome.FAIL, text, actual=[],
                           reason=_noted(facts, check, reason) if vals else reason, evidence=evidence)
        return _result(check, host, Outcome.UNKNOWN, text, reason=_noted(facts, check, f"fact {check.fact} is missing"),
                       evidence=evidence)

    test = OPERATORS[check.op].test
    if check.op == "eq" and judged.count(expected) == len(judged):
        n_bad = 0  # every value equal: decided at C speed (the common pass); _eq's looser matches need the loop
    else:
        n_bad = sum(1 for v in judged if not test(v, expected))
    scalar = "*" not in segs
    actual = judged[0] if scalar else _compact(judged)
    ok = (n_bad == 0) if check.quantifier == "all" else (n_bad < len(judged))
    if ok:
        return _result(check, host, Outcome.PASS, text, actual=actual, evidence=evidence)
    findings: tuple[Finding, ...] = ()
    if scalar:
        reason = f"{check.fact} = {render_value(judged[0])}"
    elif check.quantifier == "any":
        reason = f"none of {len(judged)} values satisfies it"
    else:
        found, _ = resolve(facts, segs, where)
        bad = [f for f in found if f.value is not None and not test(f.value, expected)]
        listed = "; ".join(f"{_fmt_path(f.path)} = {render_value(f.value)}" for f in bad[:_MAX_LISTED])
        more = f" (+{len(bad) - _MAX_LISTED} more)" if len(bad) > _MAX_LISTED else ""
        reason = f"{len(bad)} of {len(judged)} differ: {listed}{more}"
        findings = name_findings(facts, bad, expected, check.finding)
    return _result(check, host, Outcome.FAIL, text, actual=actual, reason=reason, evidence=evidence, findings=findings)


def _compact(values: list[Any]) -> Any:
    """A list of per-item values, collapsed to one value when they are all equal (reads better in tables)."""
    try:
        uniq = list(dict.fromkeys(values))
    except TypeError:
        return values
    return uniq[0] if len(uniq) == 1 and len(values) > 1 else values


def _judge_delta(check: Check, host: str, facts: Facts, found: list[Found], expected: Any, text: str,
                 evidence: tuple[str, ...], ev: _Evaluator, where: Where) -> Result:
    before = (ev.previous or {}).get(host)
    if before is None:
        return _result(check, host, Outcome.SKIP, text, reason="needs two snapshots (a soak window or --previous)")
    prev_found, _ = resolve(before, split_pointer(check.fact), where)
    prev = {f.path: f.value for f in prev_found if isinstance(f.value, (int, float))}
    if not found:
        return _result(check, host, Outcome.UNKNOWN, text, reason=f"fact {check.fact} is missing", evidence=evidence)
    if not prev:
        # A counter the earlier snapshot did not read (its collector failed there) cannot show growth: judged as
        # "no growth" it would let a soak whose first read failed pass every sample.
        return _result(check, host, Outcome.UNKNOWN, text, evidence=evidence,
                       reason=_earlier_problem(before, check, f"the earlier snapshot holds no {check.fact} to compare"))
    grew = []
    grown: list[Found] = []
    worst = 0
    for f in found:
        if not isinstance(f.value, (int, float)) or f.path not in prev:  # an item that appeared since: no growth
            continue
        delta = f.value - prev[f.path]
        if delta < 0:  # counter reset (reboot, driver reload): everything now counted is new
            delta = f.value
        worst = max(worst, delta)
        if delta > expected:
            grew.append(f"{_fmt_path(f.path)} +{render_value(delta)}")
            grown.append(Found(f.path, delta))
    if grew:
        listed = "; ".join(grew[:_MAX_LISTED]) + (f" (+{len(grew) - _MAX_LISTED} more)" if len(grew) > _MAX_LISTED else "")
        return _result(check, host, Outcome.FAIL, text, actual=worst, reason=f"grew: {listed}", evidence=evidence,
                       findings=name_findings(facts, grown, expected, check.finding, delta=True))
    return _result(check, host, Outcome.PASS, text, actual=worst, evidence=evidence)


def _earlier_problem(before: Facts, check: Check, reason: str) -> str:
    """`reason`, with why the check's collector read nothing in the earlier snapshot when it says."""
    run = (before.get("collectors") or {}).get(check.collector) or {}
    if run.get("status") == "error":
        return f"{reason} (collector {check.collector} failed then: {run.get('error', 'no reason given')})"
    return reason


#: What a host brings to a fleet-scope check, decided from its own facts alone: (host, its verdict) when it is judged
#: without the others (skipped, missing, a collector error), else (host, None, the values it is compared by, the
#: partitions it is compared within, its evidence).
FleetEntry = tuple[Any, ...]


def _fleet_entry(check: Check, host: str, facts: Facts, ev: _Evaluator, segs: tuple[str, ...], text: str) -> FleetEntry:
    values = ev.values_for(host, facts)
    skip = ev.applicability(check, values)
    if skip:
        return host, _result(check, host, Outcome.SKIP, text, reason=skip)
    problem = _collector_problem(facts, check)
    if problem:
        return host, _result(check, host, problem[0], text, reason=problem[1])
    try:
        outside = _not_applicable(check, values, facts, ev)
        if outside:
            return host, _result(check, host, Outcome.SKIP, text, reason=outside)
        where = _where(check, values, facts, ev)
    except _Skip as exc:
        return host, _result(check, host, Outcome.SKIP, text, reason=str(exc))
    found_vals, _ = ev.walk(facts, segs, where)
    vals = [v for v in found_vals if v is not None]
    if not vals:
        return host, _result(check, host, Outcome.UNKNOWN, text, reason=f"fact {check.fact} is missing",
                             evidence=_evidence(facts, check))
    if check.op == "unique":
        signature = tuple(map(render_value, vals))  # every value, repeats kept: a repeat is a finding
    else:
        signature = tuple(sorted(set(map(render_value, vals))))
    if check.partition:
        groups = ev.groups.get(host) or tuple(facts.get("groups", ()))
        parts = tuple(g for g in groups if fnmatch.fnmatchcase(g, check.partition))
        if not parts:
            return host, _result(check, host, Outcome.SKIP, text, reason=f"host is in no {check.partition} group")
    elif check.op == "unique":
        parts = ("the fleet",)  # an identifier is unique across platforms too
    else:
        parts = (f"platform {values.get('platform', 'unset')}",)
    return host, None, signature, parts, _evidence(facts, check)


def _judge_fleet(check: Check, entries: Callable[[], Iterable[FleetEntry]], text: str) -> Iterator[Result]:
    """Every host's verdict on a fleet-scope check, in the order of its entries (`entries()` gives them again each
    time): a first pass counts each partition's values, the next decides each host against those counts. What is
    held is per partition and per distinct value, never a result or an entry per host (a unique check's values are
    mostly distinct: it holds a count of each). The verdicts are those of comparing the hosts in host order."""
    if check.op == "unique":
        judge = _UniqueJudge(entries)
    else:
        judge = _SameJudge(entries)
    for host, early, *compared in entries():
        if early is not None:
            yield early
            continue
        signature, parts, evidence = compared
        verdict = None
        for name in sorted(parts):  # a host in two partitions keeps the worse verdict, partitions in name order
            res = judge.verdict(check, name, host, signature, evidence, text)
            if verdict is None or verdict.outcome is Outcome.PASS:
                verdict = res
        yield verdict


class _SameJudge:
    """Each member against its partition's majority value: per partition, each signature's count and its first host
    (hosts in name order, so ties rank as they first appear)."""

    def __init__(self, entries: Callable[[], Iterable[FleetEntry]]) -> None:
        seen: dict[str, FirstPlaceCounts] = {}  # partition -> its signatures, each with its first host
        for host, early, *compared in entries():
            if early is None:
                signature, parts, _ = compared
                for p in parts:
                    seen.setdefault(p, FirstPlaceCounts()).add(signature, host)
        self._partitions: dict[str, tuple[Counter[tuple[Any, ...]], list[tuple[tuple[Any, ...], int]], Any, int]] = {}
        for name, signatures in seen.items():
            counts = signatures.counter()
            ranked = counts.most_common()
            majority = ranked[0][0] if len(ranked) == 1 or ranked[0][1] > ranked[1][1] else None
            self._partitions[name] = (counts, ranked, majority, counts.total())

    def verdict(self, check: Check, name: str, host: str, sig: tuple[Any, ...], evidence: tuple[str, ...],
                text: str) -> Result:
        counts, ranked, majority, members = self._partitions[name]
        shown = sig[0] if len(sig) == 1 else list(sig)
        if len(sig) > 1:
            return _result(check, host, Outcome.FAIL, text, actual=shown, evidence=evidence,
                           reason=f"this host alone reports {len(sig)} different values: {', '.join(sig)}")
        if sig == majority:
            return _result(check, host, Outcome.PASS, text, actual=shown, evidence=evidence)
        if majority is None:
            return _result(check, host, Outcome.FAIL, text, actual=shown, evidence=evidence,
                           reason=f"{name} has no majority value: " + "; ".join(f"{'/'.join(s)} on {n}" for s, n in ranked[:_MAX_LISTED]))
        return _result(check, host, Outcome.FAIL, text, actual=shown, evidence=evidence,
                       reason=f"{counts[majority]} of {members} hosts in {name} have {'/'.join(majority)}")


class _UniqueJudge:
    """Each member fails for every value it shares with another member or reports twice (duplicate GUIDs).

    A first pass counts each partition's values; a second keeps, of the values seen more than once only, how many
    hosts report them and the first _MAX_LISTED + 1 of those in name order (a cloned image can put one GUID on
    thousands of hosts, and each of them names at most _MAX_LISTED of the others)."""

    def __init__(self, entries: Callable[[], Iterable[FleetEntry]]) -> None:
        counts: dict[str, Counter[Any]] = {}  # partition -> value -> times reported
        for _, early, *compared in entries():
            if early is None:
                signature, parts, _ = compared
                for p in parts:
                    counts.setdefault(p, Counter()).update(signature)
        self._reported = {p: {v: n for v, n in c.items() if n > 1} for p, c in counts.items()}
        del counts
        self._hosts: dict[str, dict[Any, list[Any]]] = {p: {} for p in self._reported}  # value -> [hosts, first hosts]
        for host, early, *compared in entries():
            if early is None:
                signature, parts, _ = compared
                for p in dict.fromkeys(parts):  # a host counts once among a value's hosts
                    reported, hosts = self._reported[p], self._hosts[p]
                    for value in dict.fromkeys(signature):
                        if value in reported:
                            held = hosts.setdefault(value, [0, []])
                            held[0] += 1
                            insort(held[1], host)
                            del held[1][_MAX_LISTED + 1:]

    def verdict(self, check: Check, name: str, host: str, sig: tuple[Any, ...], evidence: tuple[str, ...],
                text: str) -> Result:
        reported, shared_by = self._reported[name], self._hosts[name]
        clashes = []
        for value in dict.fromkeys(sig):
            held = shared_by.get(value)
            if held is None:
                continue
            n_hosts, first = held
            if n_hosts == 1:
                clashes.append(f"{value} reported {reported[value]} times")
                continue
            others = [h for h in first if h != host][:_MAX_LISTED]
            more = n_hosts - 1 - len(others)
            clashes.append(f"{value} also on {', '.join(others)}" + (f" (+{more} more)" if more else ""))
        if clashes:
            more = f" (+{len(clashes) - _MAX_LISTED} more)" if len(clashes) > _MAX_LISTED else ""
            return _result(check, host, Outcome.FAIL, text, actual=len(clashes), evidence=evidence,
                           reason=f"{len(clashes)} duplicate value(s) in {name}: " + "; ".join(clashes[:_MAX_LISTED]) + more)
        return _result(check, host, Outcome.PASS, text, actual=len(sig), evidence=evidence)


class StreamingEvaluation:
    """Evaluation fed one host at a time, as a collection finishes hosts: host-scope checks are judged at once, and
    of the fleet-scope checks what the host brings is decided at once too (its own verdict, or the values it is
    compared by), so the facts are let go; those entries are kept as Records (a chunk in memory per check, the rest
    in the scratch file) until finish() compares the hosts. finish() returns exactly the Report evaluate() returns
    for the same facts.

    add() may be called from several threads."""

    def __init__(self, baseline: Baseline, checks: Iterable[Check], groups: Mapping[str, Iterable[str]] | None = None,
                 previous: Mapping[str, Facts] | None = None):
        self.checks = list(checks)
        self._ev = _Evaluator(baseline, groups or {}, previous)
        self._host_checks = [(k, c) for k, c in enumerate(self.checks) if c.scope is not Scope.FLEET]
        self._fleet_checks = [(k, c, split_pointer(c.fact)) for k, c in enumerate(self.checks) if c.scope is Scope.FLEET]
        self._entries = Records(len(self.checks))  # fleet-scope checks: each host's FleetEntry, in the check's segment
        self._spill = Spill(len(self.checks))
        self._added: dict[str, int] = {}  # host -> its place in the order hosts were added
        self._groups: dict[str, tuple[str, ...]] = {}  # host -> the groups that chose its baseline (the report's rows)
        self._unproven: dict[str, list[str]] = {}  # host -> checks its hardware needs that the baseline left unjudged
        self._plans: dict[int, list[tuple[int, Check, str | None, str]]] = {}  # id(values) -> _host_plan
        self._lock = threading.Lock()

    def _host_plan(self, values: dict[str, Any]) -> list[tuple[int, Check, str | None, str]]:
        """The host checks of a group set (values: the evaluator's cached dict of one), each with the reason its
        baseline values put it out of scope when that is all there is to say on every host of the set (no baseline
        key wanting: _wanting would find none) and its plain expectation: ~40 of a lab host's 104 checks, whose
        results differ only by host."""
        plan = self._plans.get(id(values))
        if plan is None:
            ev = self._ev
            plan = self._plans[id(values)] = []
            for k, check in self._host_checks:
                skip = ev.applicability(check, values)
                plan.append((k, check, skip if skip and ev.gap(check, values) is None else None, ev.plain(check)))
        return plan

    def add(self, host: str, facts: Facts) -> None:
        """Judge one host's host-scope checks now, and decide what it brings to each fleet-scope check."""
        with self._lock:
            if host in self._added:
                raise ValueError(f"{host}: facts given twice")
            self._added[host] = len(self._added)
            tuples = Tuples()
            ev = self._ev
            values = ev.values_for(host, facts)
            with ev.one_host():  # each pointer walked once for this host
                for k, check, settled, plain in self._host_plan(values):
                    if settled:  # what _judge_host and _wanting would say, decided once for the group set
                        self._spill.add(k, _result(check, host, Outcome.SKIP, plain, reason=settled))
                        continue
                    r = _judge_host(check, host, facts, ev, tuples, values)
                    if r.outcome is Outcome.SKIP and (key := _wanting(check, values, facts, ev)):
                        r = _unproven(r, check, key)
                        self._unproven.setdefault(host, []).append(check.id)
                    self._spill.add(k, r)
                for k, check, segs in self._fleet_checks:
                    entry = _fleet_entry(check, host, facts, ev, segs, ev.plain(check))
                    r = entry[1]
                    if r is not None and r.outcome is Outcome.SKIP and (key := _wanting(check, values, facts, ev)):
                        entry = (host, _unproven(r, check, key))
                        self._unproven.setdefault(host, []).append(check.id)
                    self._entries.add(k, entry)
            self._groups[host] = ev.groups.get(host) or tuple(facts.get("groups", ()))

    def _fleet_entries(self, k: int, names: Sequence[str]) -> Iterator[FleetEntry]:
        """A fleet-scope check's entries in the order hosts were added, each naming its host by the string add() was
        given: an entry read back holds a copy, and a verdict's host goes into the report's failed hosts."""
        assert self._entries.added(k) == len(names), "every host added brings one entry to every fleet-scope check"
        for position, (_, *entry) in enumerate(chain.from_iterable(self._entries.segment(k))):
            yield names[position], *entry

    def finish(self, collection_errors: Mapping[str, str] | None = None, **meta: Any) -> Report:
        """The report over every host added, plus an error result per check for each host not collected."""
        hosts = sorted(self._added)
        collection_errors = dict(collection_errors or {})
        added = array("l", (self._added[h] for h in hosts))  # results are read back in host order
        arrival = array("l") if all(p == i for i, p in enumerate(added)) else added
        arrived_names = [""] * len(hosts)  # each host's own name string, by the position it was added in
        for host, position in self._added.items():
            arrived_names[position] = host
        parts: list[tuple[int, Sequence[int]]] = []
        unapplied: list[CheckCoverage] = []
        for k, check in enumerate(self.checks):
            if check.scope is Scope.FLEET:
                # Entries are kept in the order hosts were added, and so are the verdicts, spilled as they are decided
                for r in _judge_fleet(check, lambda k=k: self._fleet_entries(k, arrived_names),
                                      self._ev.plain(check)):
                    self._spill.add(k, r)
            for host, reason in sorted(collection_errors.items()):
                self._spill.add(k, _result(check, host, Outcome.ERROR, sentence(check),
                                           reason=f"host not collected: {reason}"))
            parts.append((k, arrival))
            if self._spill.only_skipped(k):
                reasons = reasons_in_order(self._spill, k, arrival)
                unapplied.append(CheckCoverage(check.id, counted_reasons(reasons) if reasons else "no hosts in scope"))
        tally = self._spill.tally(range(len(self.checks)), lambda k: self.checks[k].severity)
        all_hosts = tuple(sorted(set(hosts) | set(collection_errors)))
        ordered: dict[tuple[str, ...], tuple[str, ...]] = {}  # hosts of one group set share one tuple
        groups = {h: ordered.setdefault(g, tuple(sorted(g))) for h in all_hosts
                  if (g := tuple(self._groups.get(h) or self._ev.groups.get(h) or ()))}
        rank = {c.id: k for k, c in enumerate(self.checks)}
        not_proven = {h: tuple(sorted(ids, key=rank.__getitem__)) for h, ids in sorted(self._unproven.items())
                      if h not in collection_errors}
        return Report(results=Spilled(self._spill, parts, tally), hosts=all_hosts, baseline=self._ev.baseline.name,
                      unapplied=tuple(unapplied), collection_errors=collection_errors, groups=groups,
                      not_proven=not_proven, **meta)


def evaluate(facts_by_host: Mapping[str, Facts], baseline: Baseline, checks: Iterable[Check],
             groups: Mapping[str, Iterable[str]] | None = None, previous: Mapping[str, Facts] | None = None,
             collection_errors: Mapping[str, str] | None = None, **meta: Any) -> Report:
    """Judge every check on every host. Hosts in collection_errors (unreachable) get an error result per check."""
    stream = StreamingEvaluation(baseline, checks, groups, previous)
    for host in sorted(facts_by_host):
        stream.add(host, facts_by_host[host])
    return stream.finish(collection_errors, **meta)


def exit_code(report: Report, fail_on: str = "critical", require_all: bool = False) -> int:
    """0 all pass; 1 a failure at or above fail_on (or, with require_all, a check that applied nowhere);
    3 nothing failed but something was not collected or could not be judged (an error, or an unknown at or above
    fail_on), a host is not proven (checks its
    hardware needs went without baseline values), or no host was judged at all (nothing proven is never a pass)."""
    from ..model import ExitCode, Severity

    if not report.hosts:
        return ExitCode.INCOMPLETE
    threshold = Severity(fail_on).rank
    tally = report.tally
    if tally.count(Outcome.FAIL, threshold):
        return ExitCode.CHECK_FAILED
    if require_all and report.unapplied:
        return ExitCode.CHECK_FAILED
    if report.collection_errors or report.not_proven or tally.count(Outcome.ERROR):
        return ExitCode.INCOMPLETE
    # A check at or above the threshold that could not be judged (its fact missing, a diag that ran no hardware
    # test) is a partial proof, never a pass: the same threshold as a failure, so --fail-on warning counts both.
    if tally.count(Outcome.UNKNOWN, threshold):
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def failing_actions(report: Report, fail_on: str = "critical") -> dict[str, str]:
    """Host -> the most disruptive action of its failed checks at or above fail_on: what the failures that fail
    it (a gate, a drain) call for. Hosts that could not be collected have none."""
    from ..actions import host_actions
    from ..model import Severity

    threshold = Severity(fail_on).rank
    return host_actions(r for r in report.results
                        if r.severity.rank >= threshold and r.host not in report.collection_errors)
