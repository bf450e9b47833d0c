"""The operator vocabulary of checks: each operator with its kind, its predicate and the verbs it renders as."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


def _num(v: Any) -> float | None:
    kind = type(v)  # the JSON types first, by identity: the comparisons of every item of every host come here
    if kind is int or kind is float:
        return float(v)
    if kind is str:
        return _text_number(v)
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        return _text_number(v)
    return None


@lru_cache(maxsize=4096)
def _text_number(v: str) -> float | None:
    """A string's number, memoised: facts repeat the same words on every item and host ("Active"), and float()
    refusing one raises, the dearest part of comparing two words that differ."""
    try:
        return float(v.strip())
    except ValueError:
        return None


def _eq(a: Any, e: Any) -> bool:
    if a == e:
        return True
    na, ne = _num(a), _num(e)
    if na is not None and ne is not None:  # 26.562 vs "26.562", 400 vs 400.0
        return abs(na - ne) <= 1e-9 * max(1.0, abs(ne))
    if isinstance(a, str) and isinstance(e, str):
        return a.strip() == e.strip()
    return False


def _cmp(fn: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    def op(a: Any, e: Any) -> bool:
        na, ne = _num(a), _num(e)
        if na is None or ne is None:
            return False
        return fn(na, ne)

    return op


def _in(a: Any, e: Any) -> bool:
    choices = e if isinstance(e, (list, tuple)) else (e,)
    # An equal item is the common case and decides it at C speed; _eq's looser matches (400 vs "400") follow.
    return a in choices or any(_eq(a, x) for x in choices)


def _contains(a: Any, e: Any) -> bool:
    """A list value holds the expected item (a port's P_Key table holds the fleet's P_Key)."""
    return isinstance(a, (list, tuple)) and any(_eq(x, e) for x in a)


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _regex(a: Any, e: Any) -> bool:
    return a is not None and _compiled(str(e)).search(str(a)) is not None


def version_key(v: str) -> tuple[int, ...]:
    """'535.161.08' -> (535, 161, 8); 'MLNX_OFED_LINUX-23.10-1.1.9.0' -> (23, 10, 1, 1, 9, 0)."""
    return tuple(int(x) for x in re.findall(r"\d+", str(v)))


_CONSTRAINT = re.compile(r"^\s*(==|!=|>=|<=|>|<|~=)?\s*([^\s,]+)\s*$")


def _version(a: Any, e: Any) -> bool:
    """Every comma-separated clause of the constraint holds: '>=535.104, <536'. '~=535.161' pins the prefix."""
    if a is None:
        return False
    have = version_key(a)
    for clause in str(e).split(","):
        m = _CONSTRAINT.match(clause)
        if not m:
            return False
        opname, want_s = m.group(1) or "==", m.group(2)
        want = version_key(want_s)
        if opname == "~=":
            ok = have[: len(want)] == want
        else:
            n = max(len(have), len(want))
            h, w = have + (0,) * (n - len(have)), want + (0,) * (n - len(want))
            ok = {"==": h == w, "!=": h != w, ">=": h >= w, "<=": h <= w, ">": h > w, "<": h < w}[opname]
        if not ok:
            return False
    return True


class Kind(str, enum.Enum):
    """How an operator judges the values a fact pointer yields; check.schema.json's operator lists follow from it."""

    COMPARISON = "comparison"  # each value against expected; also what `count` compares its number with
    MATCH = "match"  # each value against a list, a pattern or a version constraint
    AGGREGATE = "aggregate"  # all the values together: their number, their sameness across hosts, their growth


@dataclass(frozen=True)
class Operator:
    name: str
    kind: Kind
    verb: str = ""  # "<subject> should <verb> <expected>"; aggregates phrase their own sentence (evaluate.sentence)
    condition: str = ""  # in a `where` filter: "<path> <condition> <expected>"
    test: Callable[[Any, Any], bool] | None = None  # (actual, expected) -> holds; per-value kinds only
    takes_expected: bool = True
    fleet: bool = False  # judged across hosts (scope: fleet), not on one host


OPERATORS: dict[str, Operator] = {
    o.name: o
    for o in (
        Operator("eq", Kind.COMPARISON, "be", "is", _eq),
        Operator("ne", Kind.COMPARISON, "not be", "is not", lambda a, e: not _eq(a, e)),
        Operator("lt", Kind.COMPARISON, "be less than", "is below", _cmp(lambda a, e: a < e)),
        Operator("le", Kind.COMPARISON, "be at most", "is at most", _cmp(lambda a, e: a <= e)),
        Operator("gt", Kind.COMPARISON, "be greater than", "is above", _cmp(lambda a, e: a > e)),
        Operator("ge", Kind.COMPARISON, "be at least", "is at least", _cmp(lambda a, e: a >= e)),
        Operator("in", Kind.MATCH, "be one of", "is one of", _in),
        Operator("not_in", Kind.MATCH, "be none of", "is none of", lambda a, e: not _in(a, e)),
        Operator("contains", Kind.MATCH, "contain", "contains", _contains),
        Operator("regex", Kind.MATCH, "match", "matches", _regex),
        Operator("version", Kind.MATCH, "be a version satisfying", "satisfies", _version),
        Operator("count", Kind.AGGREGATE),
        Operator("same", Kind.AGGREGATE, takes_expected=False, fleet=True),  # hosts agree with each other
        Operator("unique", Kind.AGGREGATE, takes_expected=False, fleet=True),  # no value on two hosts (or twice)
        Operator("delta_le", Kind.AGGREGATE),
    )
}


def fleet_names() -> tuple[str, ...]:
    """Operators that compare hosts with each other (the only ones a fleet-scope check may use)."""
    return tuple(name for name, o in OPERATORS.items() if o.fleet)


def names(*kinds: Kind) -> tuple[str, ...]:
    """Names of the operators of these kinds (every operator when none is given), in declaration order."""
    return tuple(name for name, o in OPERATORS.items() if not kinds or o.kind in kinds)


def render_value(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(render_value(x) for x in v) + "]"
    if isinstance(v, str):
        return v if v else '""'
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
