"""The fact-pointer grammar: JSON pointers (RFC 6901) whose '*' segments walk every list item or object value."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

#: Filters on the item bound by a pointer's last '*': (path inside the item, test(actual, expected), expected).
Where = tuple[tuple[tuple[str, ...], Callable[[Any, Any], bool], Any], ...]


@dataclass(frozen=True)
class Found:
    path: tuple[Any, ...]
    value: Any


@lru_cache(maxsize=4096)
def split_pointer(ptr: str) -> tuple[str, ...]:
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in ptr.strip("/").split("/")) if ptr.strip("/") else ()


@lru_cache(maxsize=4096)
def last_star(segs: tuple[str, ...]) -> int:
    """Index of the last '*' segment (where `where` filters apply), -1 if none."""
    return max((i for i, s in enumerate(segs) if s == "*"), default=-1)


def matches(item: Any, where: Where) -> bool:
    """Whether an item satisfies every filter; a filter path the item lacks fails it."""
    for path, test, expected in where:
        node = item
        for p in path:
            if isinstance(node, dict) and p in node:
                node = node[p]
            else:
                return False
        if not test(node, expected):
            return False
    return True


def resolve(doc: Any, segs: tuple[str, ...], where: Where = ()) -> tuple[list[Found], bool]:
    """Values at a pointer with '*' segments. Returns (found, any_missing). `where` filters items at the last '*'."""
    star = last_star(segs)
    found: list[Found] = []
    missing = False
    stack: list[tuple[int, tuple[Any, ...], Any]] = [(0, (), doc)]
    while stack:
        i, path, node = stack.pop()
        if i == len(segs):
            found.append(Found(path, node))
            continue
        seg = segs[i]
        if seg == "*":
            if isinstance(node, list):
                items: Iterable[tuple[Any, Any]] = enumerate(node)
            elif isinstance(node, dict):
                items = node.items()
            else:
                missing = True
                continue
            kids = []
            for k, v in items:
                if i == star and where and not matches(v, where):
                    continue
                kids.append((i + 1, path + (k,), v))
            stack.extend(reversed(kids))
        elif isinstance(node, dict):
            if seg in node:
                stack.append((i + 1, path + (seg,), node[seg]))
            else:
                missing = True
        elif isinstance(node, list) and seg.isdigit() and int(seg) < len(node):
            stack.append((i + 1, path + (int(seg),), node[int(seg)]))
        else:
            missing = True
    return found, missing


def values(doc: Any, segs: tuple[str, ...], where: Where = ()) -> tuple[list[Any], bool]:
    """The values at a pointer, without their paths: the hot path of evaluation (paths are rebuilt with
    resolve only for the rare failure that has to name them)."""
    out: list[Any] = []
    missing = _walk(doc, 0, segs, len(segs), last_star(segs), where, out)
    return out, missing


def _walk(node: Any, i: int, segs: tuple[str, ...], n: int, star: int, where: Where, out: list[Any]) -> bool:
    """values()' walk from segment i, appending what it reaches to out; whether some branch was missing. A function
    of its own, not a closure: a closure calling itself is a reference cycle per call, left to the cyclic collector."""
    while i < n:
        seg = segs[i]
        if seg == "*":
            if isinstance(node, list):
                items: Any = node
            elif isinstance(node, dict):
                items = node.values()
            else:
                return True
            if i == star and where:
                items = _kept(items, where)
            if i == n - 1:
                out.extend(items)
                return False
            if i == star:
                return _tails(items, segs[i + 1:], out)
            missing = False
            for v in items:
                if _walk(v, i + 1, segs, n, star, where, out):
                    missing = True
            return missing
        if isinstance(node, dict):
            if seg not in node:
                return True
            node = node[seg]
        elif isinstance(node, list) and seg.isdigit() and int(seg) < len(node):
            node = node[int(seg)]
        else:
            return True
        i += 1
    out.append(node)
    return False


def _kept(items: Any, where: Where) -> list[Any]:
    """The items every filter of `where` holds for (matches). One filter on a key of the item, the common case (a
    link's `active`, a port's `link_layer`, on each of a host's ~150 links), is tested in this comprehension rather
    than by a call to matches per item."""
    if len(where) == 1 and len(where[0][0]) == 1:
        ((key,), test, expected), = where
        return [v for v in items if isinstance(v, dict) and key in v and test(v[key], expected)]
    return [v for v in items if matches(v, where)]


def _tails(items: Any, tail: tuple[str, ...], out: list[Any]) -> bool:
    """_walk's steps past the pointer's last '*' (no '*' left), taken for each item in this loop rather than by a
    call per item: most pointers walk a list of GPUs or ports this way, on every host."""
    if len(tail) <= 2:
        # One or two keys into every item (a link's `gbps`, a GPU's `ecc/mode`), read by subscripts in one
        # comprehension: JSON's scalars, lists and None all refuse a str subscript with TypeError, a dict without the
        # key with KeyError, and then the loop below takes every item one at a time (list indexes, what is missing).
        try:
            if len(tail) == 1:
                (a,) = tail
                got = [node[a] for node in items if isinstance(node, dict)]
            else:
                a, b = tail
                got = [node[a][b] for node in items if isinstance(node, dict)]
        except (KeyError, TypeError):
            pass
        else:
            if len(got) == len(items):
                out.extend(got)
                return False
    missing = False
    for node in items:
        for seg in tail:
            if isinstance(node, dict):
                if seg not in node:
                    missing = True
                    break
                node = node[seg]
            elif isinstance(node, list) and seg.isdigit() and int(seg) < len(node):
                node = node[int(seg)]
            else:
                missing = True
                break
        else:
            out.append(node)
    return missing
