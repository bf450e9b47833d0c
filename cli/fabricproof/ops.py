"""The operator vocabulary of checks: each operator is a predicate plus the verb it renders as."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
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
    return any(_eq(a, x) for x in (e if isinstance(e, (list, tuple)) else [e]))


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


@dataclass(frozen=True)
class Operator:
    name: str
    test: Callable[[Any, Any], bool]
    verb: str  # "equal", "be at least", ... ; rendered "<subject> should <verb> <expected>"


OPERATORS: dict[str, Operator] = {
    o.name: o
    for o in (
        Operator("eq", _eq, "be"),
        Operator("ne", lambda a, e: not _eq(a, e), "not be"),
        Operator("lt", _cmp(lambda a, e: a < e), "be less than"),
        Operator("le", _cmp(lambda a, e: a <= e), "be at most"),
        Operator("gt", _cmp(lambda a, e: a > e), "be greater than"),
        Operator("ge", _cmp(lambda a, e: a >= e), "be at least"),
        Operator("in", _in, "be one of"),
        Operator("not_in", lambda a, e: not _in(a, e), "be none of"),
        Operator("regex", _regex, "match"),
        Operator("version", _version, "be a version satisfying"),
    )
}

# Operators over a whole set of values rather than each value.
AGGREGATE_OPS = ("count", "same", "delta_le")
ALL_OPS = tuple(OPERATORS) + AGGREGATE_OPS


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
