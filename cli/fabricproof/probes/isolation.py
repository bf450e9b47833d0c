"""The collective search (pure): which host(s), host pair or fabric path between leaves makes a collective slow or
fail, in few rounds of disjoint groups run at once, every test a recorded decision."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SPINES = "spines"  # the far end of a leaf whose every path to other leaves is slow: its uplinks


@dataclass(frozen=True)
class Outcome:
    """What one collective over one group gave: a figure (busbw, GB/s), or a failure in the tool's own words
    (kind: "timeout" when the step was cancelled at its time limit, "hang", "error")."""

    figure: float | None = None
    failure: str | None = None
    kind: str = "figure"

    @classmethod
    def failed(cls, words: str, kind: str = "error") -> Outcome:
        return cls(None, words, kind)


@dataclass(frozen=True)
class Settings:
    """threshold: the least figure a healthy group reaches at this scale; margin: the noise band around it, as a
    fraction (a figure within threshold x (1 +- margin) is borderline and run again, up to `retests` times, then
    judged on the median); max_rounds bounds the search; group_size overrides the ~sqrt(N) screening groups."""

    threshold: float
    margin: float = 0.05
    retests: int = 2
    max_rounds: int = 60
    group_size: int | None = None


@dataclass(frozen=True)
class Decision:
    """One test: its round, the group (references included), what it gave and why it ran."""

    index: int
    round: int
    group: tuple[str, ...]
    outcome: Outcome
    result: str  # "pass" | "slow" | "failed" | "borderline"
    why: str
    refs: tuple[str, ...] = ()  # the hosts that passed earlier, added to the group to confirm its suspect(s)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "round": self.round, "group": list(self.group), "figure": self.outcome.figure,
                "failure": self.outcome.failure, "failure_kind": None if self.outcome.failure is None
                else self.outcome.kind, "result": self.result, "why": self.why}


@dataclass(frozen=True)
class Finding:
    """One thing at fault: a host, a host pair (hosts fine alone, slow together) or a path between two leaves (or a
    leaf and the spines), with the decisions that prove it, in order."""

    kind: str  # "host" | "pair" | "path"
    members: tuple[str, ...]
    why: str
    evidence: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "members": list(self.members), "why": self.why, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Verdict:
    """The search's outcome: what is at fault, what it could not settle, and every decision."""

    findings: tuple[Finding, ...]
    unresolved: tuple[str, ...]
    reproduced: bool
    decisions: tuple[Decision, ...]
    rounds: int
    settings: Settings

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted(m for f in self.findings if f.kind == "host" for m in f.members))

    @property
    def pairs(self) -> tuple[tuple[str, ...], ...]:
        return tuple(sorted(f.members for f in self.findings if f.kind == "pair"))

    @property
    def paths(self) -> tuple[tuple[str, ...], ...]:
        return tuple(sorted(f.members for f in self.findings if f.kind == "path"))

    @property
    def tests(self) -> int:
        return len(self.decisions)

    @property
    def state(self) -> str:
        if self.findings:
            return "at fault"
        if self.unresolved:
            return "unresolved"
        return "clear" if not self.reproduced else "unresolved"

    def of_host(self, host: str) -> str:
        """What the search says of one host, for a per-host check: "at fault", "pair only" (slow with one partner
        only), "unresolved", or "ok" (a path between leaves is the fabric's, never its hosts')."""
        if host in self.hosts:
            return "at fault"
        if any(host in p for p in self.pairs):
            return "pair only"
        return "unresolved" if host in self.unresolved else "ok"

    def to_facts(self) -> dict[str, Any]:
        """The shape of /perf/collective/isolation: the verdict, what is at fault with its evidence chain, and the
        search's path (every decision)."""
        return {"verdict": self.state, "hosts": list(self.hosts), "pairs": [list(p) for p in self.pairs],
                "paths": [list(p) for p in self.paths], "unresolved": list(self.unresolved),
                "findings": [f.to_dict() for f in self.findings], "rounds": self.rounds, "tests": self.tests,
                "threshold": self.settings.threshold, "margin": self.settings.margin,
                "decisions": [d.to_dict() for d in self.decisions]}


@dataclass(frozen=True)
class _Req:
    """A test a case asks for: its hosts, how many known-good references to add, why, references to avoid."""

    hosts: tuple[str, ...]
    refs: int
    why: str
    avoid: frozenset[str] = frozenset()


@dataclass
class _Judged:
    """A test once judged (retests included): the group it ran on, pass or not, and its decisions."""

    req: _Req
    group: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    figures: list[float] = field(default_factory=list)
    failure: Outcome | None = None
    decisions: list[int] = field(default_factory=list)
    passed: bool | None = None  # None while not final


Case = Generator[list[_Req], list[_Judged], None]
Run = Callable[[list[list[str]]], list[Outcome]]


def screening_groups(hosts: Sequence[str], size: int | None = None) -> list[tuple[str, ...]]:
    """About sqrt(N) groups of about sqrt(N) hosts, in the given order (when nothing else is known)."""
    n = len(hosts)
    count = max(1, round(n / size)) if size else max(1, round(math.sqrt(n)))
    return [tuple(hosts[i * n // count:(i + 1) * n // count]) for i in range(count)]


def _halves(items: Sequence[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    mid = (len(items) + 1) // 2
    return tuple(items[:mid]), tuple(items[mid:])


class _Search:
    """The scheduler: each round, every open case's pending tests whose hosts are free, run at once."""

    def __init__(self, run: Run, settings: Settings, leaves: Mapping[str, str]) -> None:
        self.run_groups = run
        self.s = settings
        self.leaves = dict(leaves)
        self.cleared: set[str] = set()
        self.findings: list[Finding] = []
        self.suspects: set[str] = set()  # hosts of cases not yet settled
        self.decisions: list[Decision] = []
        self.round = 0
        self.cases: list[tuple[Case, list[_Judged]]] = []
        self.failed_groups: list[tuple[str, ...]] = []  # the screening's slow groups, what verify runs again
        self.whole_failed = False
        self.whole_ok = False  # the whole set, without what was found, passed

    # -- cases -------------------------------------------------------------------------------------------------

    def spawn(self, case: Case) -> None:
        try:
            reqs = next(case)
        except StopIteration:
            return
        self.cases.append((case, [_Judged(r) for r in reqs]))

    def accused(self) -> set[str]:
        return {m for f in self.findings if f.kind == "host" for m in f.members}

    def accuse(self, kind: str, members: Iterable[str], why: str, evidence: Iterable[int]) -> None:
        members = tuple(sorted(members)) if kind != "path" else tuple(members)
        if any(f.kind == kind and f.members == members for f in self.findings):
            return
        self.findings.append(Finding(kind, members, why, tuple(sorted(set(evidence)))))
        if kind == "host":
            self.cleared -= set(members)

    def leaf(self, hosts: Iterable[str]) -> set[str]:
        return {self.leaves[h] for h in hosts if h in self.leaves}

    def single(self, group: tuple[str, ...], chain: tuple[int, ...]) -> Case:
        """`group` was slow or failed: bisect it, both halves at once; a host alone is tested with a reference."""
        self.suspects |= set(group)
        if len(group) == 1:
            yield from self.suspect(group[0], chain)
            return
        left, right = _halves(group)
        res = yield [_Req(part, 0, f"bisect: half of a slow group of {len(group)}") if len(part) > 1 else
                     _Req(part, 1, f"confirm {part[0]}: half of a slow group of {len(group)}, paired with a host "
                          "that passed") for part in (left, right)]
        failing = [(part, r) for part, r in zip((left, right), res, strict=True) if not r.passed]
        for part, r in zip((left, right), res, strict=True):
            if r.passed:
                self.cleared |= set(part)
                self.suspects -= set(part)
        for part, r in failing:
            if len(part) == 1:
                self.spawn(self.confirm(part[0], r, (*chain, *r.decisions)))
            else:
                self.spawn(self.single(part, (*chain, *r.decisions)))
        if not failing:
            self.spawn(self.cross(left, right, chain))

    def suspect(self, host: str, chain: tuple[int, ...]) -> Case:
        (r,) = yield [_Req((host,), 1, f"confirm {host}: paired with a host that passed")]
        if r.passed:
            self.cleared.add(host)
            self.suspects.discard(host)
            return
        yield from self.confirm(host, r, (*chain, *r.decisions))

    def confirm(self, host: str, first: _Judged, chain: tuple[int, ...]) -> Case:
        """`host` was slow with one reference: again with another; slow with both -> the host; slow with the
        first only -> that pair, once it is slow again."""
        (r,) = yield [_Req((host,), 1, f"confirm {host} again: with another host that passed",
                           frozenset(first.refs))]
        if not r.passed:
            chain = (*chain, *r.decisions)
            home = self.leaves.get(host)
            if home is not None and all(self.leaves.get(ref) != home for ref in first.refs + r.refs):
                # both references from other leaves: slow uplinks of its leaf would slow them alike
                control = next((h for h in sorted(self.cleared - self.suspects) if self.leaves.get(h) == home), None)
                if control is None:
                    # no host of its leaf passed (every screening group spanned the leaf, as at cross_leaf): a host
                    # of its own leaf has no spine between them, so a pass there leaves only its leaf's uplinks
                    mate = next((h for h in sorted(self.suspects - self.accused() - {host})
                                 if self.leaves.get(h) == home), None)
                    if mate is None:
                        return  # unresolved: nothing of its leaf to tell the host from the leaf's uplinks
                    (w,) = yield [_Req((host, mate), 0, f"within leaf {home}: {host} with {mate}, no spine between "
                                       "them")]
                    if w.passed:
                        self.suspects.discard(host)
                        self.accuse("path", (home, SPINES), f"{host} is slow with hosts of two other leaves and fine "
                                    f"with {mate} of its own leaf {home}: its uplinks", (*chain, *w.decisions))
                    return
                (c,) = yield [_Req((control, first.refs[0]), 0, f"control: another host of leaf {home} with "
                                   f"{first.refs[0]}")]
                if not c.passed:
                    return  # its leaf's path, not the host: left to the leaves' search
                chain = (*chain, *c.decisions)
            self.accuse("host", (host,), f"slow with two hosts that passed ({', '.join(first.refs + r.refs)})",
                        chain)
            return
        self.cleared.add(host)
        self.suspects.discard(host)
        (p,) = yield [_Req((host, *first.refs), 0, f"retest {host} with {first.refs[0]}: slow together, "
                           "fine apart")]
        if not p.passed:
            self.accuse("pair", (host, *first.refs), "slow together, each fine with another host",
                        (*chain, *r.decisions, *p.decisions))

    def cross(self, a: tuple[str, ...], b: tuple[str, ...], chain: tuple[int, ...], leaf_checked: bool = False
              ) -> Case:
        """a and b each pass alone, together they are slow: a slow pair between them, or the path between their
        leaves. Halve both sides and test the combinations, two disjoint ones per round."""
        la, lb = self.leaf(a), self.leaf(b)
        if not leaf_checked and len(la) == 1 and len(lb) == 1 and la != lb and len(a) >= 2 and len(b) >= 2:
            # one leaf each: two disjoint pairs across tell the path between the leaves from one bad pair
            r1, r2 = yield [_Req((a[0], b[0]), 0, "across the two leaves: is it their path?"),
                            _Req((a[1], b[1]), 0, "across the two leaves: another pair")]
            if not r1.passed and not r2.passed:
                yield from self.path(la.pop(), lb.pop(), (*chain, *r1.decisions, *r2.decisions))
                return
            leaf_checked = True
        if len(a) == 1 and len(b) == 1:  # the two were slow together in the test that opened this case
            x, y = self.leaf(a), self.leaf(b)
            if x and y and x != y:
                yield from self.path(x.pop(), y.pop(), chain, pair=(a[0], b[0]))
                return
            self.accuse("pair", (a[0], b[0]), "slow together, each fine in its own group", chain)
            return
        if len(a) < len(b):
            a, b = b, a
        a1, a2 = _halves(a)
        if len(b) == 1:
            for part in (a1, a2):
                (r,) = yield [_Req(part + b, 0, f"across: {len(part)} of one side with {b[0]}")]
                if not r.passed:
                    self.spawn(self.cross(part, b, (*chain, *r.decisions), leaf_checked))
                    return
            return
        b1, b2 = _halves(b)
        for combos in (((a1, b1), (a2, b2)), ((a1, b2), (a2, b1))):
            res = yield [_Req(x + y, 0, f"across: {len(x)} of one side with {len(y)} of the other") for x, y in combos]
            slow = [(xy, r) for xy, r in zip(combos, res, strict=True) if not r.passed]
            for (x, y), r in slow:
                self.spawn(self.cross(x, y, (*chain, *r.decisions), leaf_checked))
            if slow:
                return

    def path(self, x: str, y: str, chain: tuple[int, ...], pair: tuple[str, str] | None = None) -> Case:
        """Leaves x and y are slow together. In one round: a host of each with two hosts of a third leaf (one leaf's
        uplinks, when only its side is slow) and, after a slow pair, two other hosts of x and y (the path between
        the leaves when they are slow too, else the pair's own path)."""
        def spare(leaf: str, used: set[str]) -> str | None:
            return next((h for h in sorted(self.cleared) if self.leaves.get(h) == leaf and h not in used), None)

        used = set(pair or ())
        hx = spare(x, used)
        hy = spare(y, used | {hx or ""})
        used |= {hx or "", hy or ""}
        reqs: list[_Req] = []
        # two hosts of one third leaf: if that leaf's own uplinks are slow, both tests fail and prove nothing
        for z in sorted({self.leaves[h] for h in self.cleared if h in self.leaves} - {x, y}):
            zx = spare(z, used)
            zy = spare(z, used | {zx or ""})
            if hx and hy and zx and zy:
                used |= {zx, zy}
                reqs = [_Req((hx, zx), 0, f"leaf {x} with a third leaf"), _Req((hy, zy), 0, f"leaf {y} with a "
                                                                                            "third leaf")]
                break
        if pair is not None:
            ox = spare(x, used)
            oy = spare(y, used | {ox or ""})
            if ox and oy:
                reqs.append(_Req((ox, oy), 0, f"two other hosts of leaves {x} and {y}"))
        res = (yield reqs) if reqs else []
        chain = (*chain, *(d for r in res for d in r.decisions))
        if len(res) >= 2 and res[0].passed != res[1].passed:
            leaf = x if not res[0].passed else y
            self.accuse("path", (leaf, SPINES), f"leaf {leaf} is slow with every other leaf: its uplinks", chain)
            return
        if pair is not None and len(res) % 2 == 1 and res[-1].passed:
            self.accuse("pair", pair, "slow together, each fine in its own group; other hosts of their leaves are "
                        "fine together", chain)
            return
        if pair is not None and len(res) % 2 == 0:  # no other hosts to tell the pair from the leaves' path
            self.accuse("pair", pair, "slow together, each fine in its own group", chain)
            return
        self.accuse("path", tuple(sorted((x, y))), f"hosts of leaves {x} and {y} are slow together, fine within "
                    "their leaves", chain)

    def multi(self, parts: list[tuple[str, ...]], chain: tuple[int, ...]) -> Case:
        """Every part passed alone, the whole set did not: halve the parts until two are slow together."""
        if len(parts) == 2:
            yield from self.cross(parts[0], parts[1], chain)
            return
        left, right = _halves(parts)
        sides = [side for side in (left, right) if len(side) >= 2]
        res = yield [_Req(tuple(h for p in side for h in p), 0, f"{len(side)} groups that passed, together")
                     for side in sides]
        slow = [(side, r) for side, r in zip(sides, res, strict=True) if not r.passed]
        for side, r in slow:
            self.spawn(self.multi(list(side), (*chain, *r.decisions)))
        if not slow:
            yield from self.cross(tuple(h for p in left for h in p), tuple(h for p in right for h in p), chain)

    # -- rounds ------------------------------------------------------------------------------------------------

    def judge(self, t: _Judged) -> None:
        thr, m = self.s.threshold, self.s.margin
        if t.failure is not None:
            t.passed = False
            return
        last = t.figures[-1]
        if last >= thr * (1 + m) or last < thr * (1 - m):
            t.passed = last >= thr * (1 + m) if len(t.figures) == 1 else statistics.median(t.figures) >= thr
        elif len(t.figures) > self.s.retests:
            t.passed = statistics.median(t.figures) >= thr

    def pick_refs(self, t: _Judged, busy: set[str]) -> tuple[str, ...] | None:
        """Known-good hosts for a test that asks for them: never busy this round, never suspect; of the suspects'
        own leaf first, so a path between leaves does not taint a confirmation."""
        home = self.leaf(t.req.hosts)
        pool = sorted(self.cleared - busy - self.suspects - set(t.req.hosts) - t.req.avoid)
        pool.sort(key=lambda h: self.leaves.get(h) not in home)
        return tuple(pool[:t.req.refs]) if len(pool) >= t.req.refs else None

    def run_round(self, tests: list[_Judged]) -> bool:
        """One round of every pending test whose hosts are free; False when none could run."""
        busy: set[str] = set()
        plan: list[_Judged] = []
        for t in sorted(tests, key=lambda t: t.req.refs > 0):
            if not t.group:
                refs = self.pick_refs(t, busy) if t.req.refs else ()
                if refs is None:
                    continue
                t.refs, t.group = refs, t.req.hosts + refs
            if busy & set(t.group):
                continue
            busy |= set(t.group)
            plan.append(t)
        if not plan:
            return False
        self.round += 1
        outcomes = self.run_groups([list(t.group) for t in plan])
        for t, out in zip(plan, outcomes, strict=True):
            if out.failure is None and out.figure is not None:
                t.figures.append(out.figure)
            else:
                t.failure = out if out.failure is not None else Outcome.failed("no figure", "error")
            self.judge(t)
            result = ("failed" if t.failure else "borderline" if t.passed is None
                      else "pass" if t.passed else "slow")
            why = t.req.why if len(t.decisions) == 0 else (
                f"retest: {t.figures[-2]:g} is within {self.s.margin:.0%} of the threshold {self.s.threshold:g}")
            t.decisions.append(len(self.decisions))
            self.decisions.append(Decision(len(self.decisions), self.round, t.group, out, result, why, t.refs))
        return True

    def drain(self) -> None:
        """Run the open cases to their end (or the round budget): a case resumes once all its tests are judged."""
        while self.cases and self.round < self.s.max_rounds:
            pending = [t for _, tests in self.cases for t in tests if t.passed is None]
            if not self.run_round(pending):
                break
            still: list[tuple[Case, list[_Judged]]] = []
            ready = [(c, ts) for c, ts in self.cases if all(t.passed is not None for t in ts)]
            still = [(c, ts) for c, ts in self.cases if any(t.passed is None for t in ts)]
            self.cases = still
            for case, tests in ready:
                try:
                    reqs = case.send(tests)
                except StopIteration:
                    continue
                self.cases.append((case, [_Judged(r) for r in reqs]))

    def screen(self, groups: list[tuple[str, ...]]) -> Case:
        """Every group at once; slow ones are bisected; if all pass, the whole set once; if that is slow, the
        groups are taken together until two are slow together."""
        runnable = [g for g in groups if len(g) >= 2]
        res = yield [_Req(g, 0, "screen: one group of the set") for g in runnable]
        for g in groups:
            if len(g) == 1:
                self.spawn(self.single(g, ()))
        slow = [(g, r) for g, r in zip(runnable, res, strict=True) if not r.passed]
        for g, r in zip(runnable, res, strict=True):
            if r.passed:
                self.cleared |= set(g)
        for g, r in slow:
            self.spawn(self.single(g, tuple(r.decisions)))
        self.failed_groups = [g for g, _ in slow]
        if slow or len(runnable) < 2:
            return
        (whole,) = yield [_Req(tuple(h for g in runnable for h in g), 0, "every group passed: the whole set")]
        self.whole_failed = not whole.passed
        if not whole.passed:
            self.spawn(self.multi(runnable, tuple(whole.decisions)))

    def without_findings(self, groups: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """The groups without what is at fault (one host of each pair), those still big enough to run."""
        drop = self.accused() | {f.members[1] for f in self.findings if f.kind == "pair"}
        # a path stays in every set that spans its leaves: without the (second) leaf's hosts
        slow_leaves = {f.members[0] if f.members[1] == SPINES else f.members[1] for f in self.findings
                       if f.kind == "path"}
        drop |= {h for h, leaf in self.leaves.items() if leaf in slow_leaves}
        return [g for g in (tuple(h for h in g if h not in drop) for g in groups) if len(g) >= 2]

    def verify(self) -> Case:
        """The groups that were slow, without what is at fault: they must pass now."""
        groups = self.without_findings(self.failed_groups)
        if not groups:
            return
        res = yield [_Req(g, 0, "verify: a group that was slow, without what is at fault") for g in groups]
        self.failed_groups = []
        for g, r in zip(groups, res, strict=True):
            if not r.passed:
                self.failed_groups.append(g)
                self.spawn(self.single(g, tuple(r.decisions)))

    def verify_whole(self, groups: list[tuple[str, ...]]) -> Case:
        """The whole set without what is at fault: a pair split by the screening, hidden while another fault made
        its own group slow, shows here, and is searched for between the groups."""
        parts = self.without_findings(groups)
        if len(parts) < 2:
            self.whole_ok = True
            return
        (r,) = yield [_Req(tuple(h for p in parts for h in p), 0, "verify: the whole set without what is at fault")]
        self.whole_ok = bool(r.passed)
        if not r.passed:
            self.spawn(self.multi(parts, tuple(r.decisions)))


def search(hosts: Sequence[str], run: Run, settings: Settings, groups: Sequence[Sequence[str]] | None = None,
           leaves: Mapping[str, str] | None = None, verify: int = 3) -> Verdict:
    """Find what makes a collective over `hosts` slow. `run` runs disjoint groups at once (one round) and returns
    an Outcome per group. `groups` screen first (NVLink domains, leaves); without them, the leaves' hosts, else
    ~sqrt(N) groups. `leaves` (host -> leaf) lets the search point at the path between leaves. A slow group is
    bisected, both halves in the same round; a host alone is confirmed with two hosts that passed; groups that
    pass alone but not together are searched for the pair (or leaves' path) between them; the groups that were
    slow are run again without what was found (`verify` times at most) before the verdict."""
    hosts = list(dict.fromkeys(hosts))
    leaves = leaves or {}
    if groups is None and leaves:
        by_leaf: dict[str, list[str]] = {}
        for h in hosts:
            by_leaf.setdefault(leaves.get(h, ""), []).append(h)
        groups = [g for leaf in sorted(by_leaf) for g in screening_groups(by_leaf[leaf], settings.group_size
                                                                          or len(by_leaf[leaf]))]
    screen_groups = [tuple(g) for g in groups] if groups is not None else screening_groups(hosts, settings.group_size)
    s = _Search(run, settings, leaves)
    s.spawn(s.screen(screen_groups))
    s.drain()
    reproduced = bool(s.failed_groups) or s.whole_failed
    for _ in range(verify + 1):
        if s.cases or s.round >= settings.max_rounds or not reproduced:
            break
        if s.failed_groups:
            s.spawn(s.verify())
        elif s.whole_ok:
            break
        else:
            s.spawn(s.verify_whole(screen_groups))
        s.drain()
    unresolved = sorted(s.suspects - s.accused() - s.cleared)
    return Verdict(tuple(s.findings), tuple(unresolved), reproduced, tuple(s.decisions), s.round, settings)


__all__ = ["SPINES", "Decision", "Finding", "Outcome", "Settings", "Verdict", "screening_groups", "search"]
