"""The drain circuit breaker: fabricproof drains a node only while few of its partition were drained by fabricproof
in a window, judged from Slurm's own node state so that every node sees the same count."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from . import slurm
from .errors import InputError
from .timeutil import format_duration, parse_duration

#: Drains the breaker counts: a health check's, and the isolate runbook's (both drain because checks failed). A
#: rollout's wave drain ("fabricproof: <plan> run <id>") is planned maintenance and is not counted.
COUNTED = (slurm.REASON_PREFIX, "fabricproof: runbook ")
#: The breaker's own state lives in Slurm, in node Comments, so every node reads it with the node list it already
#: reads: "open" (latched by the node that found the limit reached) and "reset" (written by a person's reset).
MARKER = "fabricproof breaker:"
DEFAULT_LIMIT = "10%"
DEFAULT_WINDOW = "1h"
#: How far another node's clock (or slurmctld's) may be behind this one's. A drain is recounted once slurmctld's
#: clock has passed the second it stamped the drain with: every drain ordered before it is applied by then.
CLOCK_SKEW_S = 1.0

_MARK = re.compile(rf"^{re.escape(MARKER)} (open|reset) (\d+)\b ?(.*)$")
_REASON = re.compile(r" Reason=(.*?) \[([^\]@\s]*)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]")
_COMMENT = re.compile(r" Comment=(.*?)(?= Extra=|$)")


@dataclass(frozen=True)
class Limit:
    """At most `count` nodes, or `share` percent of the partition (rounded down, never below one node)."""

    text: str
    count: int | None = None
    share: float | None = None

    def nodes(self, total: int) -> int:
        if self.count is not None:
            return self.count
        assert self.share is not None
        return max(1, math.floor(total * self.share / 100 + 1e-9))


def parse_limit(text: str, option: str = "--breaker") -> Limit:
    value = text.strip()
    try:
        if value.endswith("%"):
            share = float(value[:-1])
            if not 0 < share <= 100 or not math.isfinite(share):
                raise ValueError
            return Limit(value, share=share)
        count = int(value)
        if count < 1:
            raise ValueError
        return Limit(value, count=count)
    except ValueError:
        raise InputError(f"{option} {text!r}: give a share of the partition (10%) or a count of nodes (6), at least "
                         f"one node") from None


def parse_window(text: str, option: str = "--breaker-window") -> int:
    try:
        seconds = parse_duration(int(text) if text.strip().isdigit() else text.strip())
    except ValueError:
        seconds = 0
    if seconds <= 0:
        raise InputError(f"{option} {text!r}: give a duration, e.g. 1h, 30m or 3600")
    return seconds


def window_words(seconds: int) -> str:
    return "the last hour" if seconds == 3600 else f"the last {format_duration(seconds)}"


@dataclass(frozen=True)
class ClusterNode:
    name: str
    state: str
    reason: str | None
    reason_time: int | None  # epoch seconds slurmctld stamped the reason with (scontrol prints it to the second)
    partitions: tuple[str, ...]
    comment: str | None

    @property
    def counted(self) -> bool:
        """Drained by fabricproof because checks failed."""
        return "DRAIN" in self.state.upper() and bool(self.reason) and self.reason.startswith(COUNTED)

    @property
    def marker(self) -> tuple[str, int, str] | None:
        m = _MARK.match(self.comment or "")
        return (m[1], int(m[2]), m[3]) if m else None

    @property
    def comment_free(self) -> bool:
        """Its Comment is empty or the breaker's own: never overwrite a person's."""
        return not self.comment or self.marker is not None


def _epoch(local: str) -> int:
    # scontrol prints times in its own local time zone; this runs where scontrol ran.
    return int(datetime.strptime(local, "%Y-%m-%dT%H:%M:%S").timestamp())


def parse_nodes(text: str) -> list[ClusterNode]:
    """`scontrol show node -o` (one node a line) -> every node's state, reason, reason time, partitions, comment."""
    nodes = []
    for line in text.splitlines():
        name = re.match(r"NodeName=(\S+)", line)
        if not name:
            continue
        state = re.search(r" State=(\S+)", line)
        parts = re.search(r" Partitions=(\S*)", line)
        reason = _REASON.search(line)
        comment = _COMMENT.search(line)
        nodes.append(ClusterNode(
            name=name[1], state=state[1] if state else "UNKNOWN",
            reason=reason[1].strip() if reason else None, reason_time=_epoch(reason[3]) if reason else None,
            partitions=tuple(p for p in (parts[1] if parts else "").split(",") if p),
            comment=comment[1].strip() if comment and comment[1].strip() not in ("", "(null)") else None))
    return nodes


def scope_of(nodes: Sequence[ClusterNode], node: str) -> list[ClusterNode]:
    """The nodes sharing a partition with `node` (itself included): the population its breaker judges."""
    me = next((n for n in nodes if n.name == node), None)
    if me is None:
        raise slurm.SlurmError(f"scontrol show node lists no node {node}")
    if not me.partitions:
        return [me]
    return [n for n in nodes if set(n.partitions) & set(me.partitions)]


def in_partitions(nodes: Sequence[ClusterNode], partitions: Iterable[str]) -> list[ClusterNode]:
    wanted = set(partitions)
    return [n for n in nodes if set(n.partitions) & wanted] if wanted else list(nodes)


def _stamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Verdict:
    """The breaker as every node of the scope sees it at one moment."""

    scope: tuple[ClusterNode, ...]
    drains: tuple[ClusterNode, ...]  # counted drains in the window since the last reset, in drain order
    allowed: int
    limit: Limit
    window_s: int
    reset_at: int | None
    opened: tuple[int, str] | None  # latched open: when, and what the node that opened it said

    @property
    def open(self) -> bool:
        return self.opened is not None or len(self.drains) >= self.allowed

    def rank(self, node: str) -> int | None:
        """How many counted drains come before `node`'s (None: it is not one)."""
        names = [n.name for n in self.drains]
        return names.index(node) if node in names else None

    def count_words(self, leave_out: str | None = None) -> str:
        n = len([d for d in self.drains if d.name != leave_out])
        limit = self.limit.text + (f" ({self.allowed} node{'s' if self.allowed != 1 else ''})"
                                   if self.limit.share is not None else "")
        return (f"{n} of {len(self.scope)} drained by fabricproof in {window_words(self.window_s)}, limit {limit}")

    def headline(self, leave_out: str | None = None) -> str:
        if self.opened is not None:
            return f"breaker open since {_stamp(self.opened[0])} ({self.opened[1]}), {self.count_words(leave_out)}"
        return f"breaker {'open' if self.open else 'closed'}, {self.count_words(leave_out)}"

    def lines(self) -> list[str]:
        """The counted drains, one a line, and the last reset (for `breaker status`)."""
        out = [f"  {d.name}  {_stamp(d.reason_time) if d.reason_time else '?'}  {d.reason}" for d in self.drains]
        if self.reset_at is not None:
            out.append(f"  last reset {_stamp(self.reset_at)}: drains before it are not counted")
        return out


def judge(scope: Sequence[ClusterNode], limit: Limit, window_s: int, now: float) -> Verdict:
    resets = [m[1] for n in scope if (m := n.marker) and m[0] == "reset"]
    reset_at = max(resets) if resets else None
    since = max(now - window_s, reset_at or 0)
    drains = sorted((n for n in scope if n.counted and (n.reason_time is None or n.reason_time >= since)),
                    key=lambda n: (n.reason_time or 0, n.name))
    opens = sorted((m[1], m[2]) for n in scope if (m := n.marker) and m[0] == "open" and m[1] >= (reset_at or 0))
    return Verdict(tuple(scope), tuple(drains), limit.nodes(len(scope)), limit, window_s, reset_at,
                   opens[0] if opens else None)


# ------------------------------------------------------------------------------------------------ Slurm I/O


def show_all_argv() -> list[str]:
    return ["scontrol", "show", "node", "-o"]


def comment_argv(nodes: Sequence[str], text: str) -> list[str]:
    return ["scontrol", "update", f"nodename={','.join(nodes)}", f"comment={text}"]


def read(run: Callable[[list[str]], str] = slurm.run) -> list[ClusterNode]:
    return parse_nodes(run(show_all_argv()))


def latch(verdict: Verdict, node: str, now: float, run: Callable[[list[str]], str] = slurm.run) -> str | None:
    """Record the breaker open in Slurm (on `node`'s Comment, or another free one of the scope); why not, if not."""
    if verdict.opened is not None:
        return None
    free = sorted((n for n in verdict.scope if n.comment_free), key=lambda n: (n.name != node, n.name))
    if not free:
        return "the breaker could not be latched open: every node of the partition has a Comment of someone else's"
    said = f"{node}: {verdict.count_words()}"
    run(comment_argv([free[0].name], f"{MARKER} open {int(now)} {said}"))
    return None


@dataclass(frozen=True)
class Guarded:
    drained: bool
    messages: list[str]


def guarded_drain(node: str, action: slurm.Action, limit: Limit, window_s: int,
                  run: Callable[[list[str]], str] = slurm.run, clock: Callable[[], float] = time.time,
                  sleep: Callable[[float], None] = time.sleep) -> Guarded:
    """Drain `node` with `action` unless the breaker is open. Concurrent checks may all find it closed and drain:
    each then waits until every drain ordered before its own is visible, recounts, and a node past the limit in
    drain order resumes itself and latches the breaker open, so no more than the limit stay drained."""
    reason = action.reason
    before = judge(scope_of(read(run), node), limit, window_s, clock())
    if before.open:
        notes = [f"would drain: {before.headline()}; {node} left in service ({reason})"]
        problem = latch(before, node, clock(), run)
        return Guarded(False, notes + ([problem] if problem else []))
    run(action.argv or [])
    mine = next(iter(parse_nodes(run([*show_all_argv(), node]))), None)
    stamped = mine.reason_time if mine and mine.reason_time is not None else int(clock())
    wait = stamped + 1 + CLOCK_SKEW_S - clock()
    if wait > 0:
        sleep(min(wait, 2 + CLOCK_SKEW_S))
    after = judge(scope_of(read(run), node), limit, window_s, clock())
    rank = after.rank(node)
    if rank is None or rank < after.allowed:
        return Guarded(True, [action.message])
    me = next(n for n in after.scope if n.name == node)
    if me.reason == reason:  # still the drain this run made: nobody has changed it since
        run(slurm.resume_argv(node))
    notes = [f"would drain: breaker open, {after.count_words(leave_out=node)}; {node} left in service ({reason}): "
             f"{rank} drain(s) came first"]
    problem = latch(after, node, clock(), run)
    return Guarded(False, notes + ([problem] if problem else []))


def reset(scope: Sequence[ClusterNode], who: str, now: float,
          run: Callable[[list[str]], str] = slurm.run) -> tuple[list[str], list[str]]:
    """Close the breaker for `scope`: a reset marker on every node whose Comment is free (drains before it stop
    counting, open markers are overwritten); (nodes marked, nodes whose Comment is someone else's)."""
    free = [n.name for n in scope if n.comment_free]
    kept = [n.name for n in scope if not n.comment_free]
    if free:
        run(comment_argv(free, f"{MARKER} reset {int(now)} by {who}"))
    return free, kept
