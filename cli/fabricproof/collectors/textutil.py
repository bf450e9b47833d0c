"""Small pure text helpers shared by parsers: ANSI stripping, key/value splitting, numbers, indentation trees."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_DIGIT_RUNS = re.compile(r"(\d+)")
_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?\d+(?:\.\d+)?")
# Spellings of "no value" (compared upper-cased); any "[...]" value is missing too.
_MISSING = frozenset({"N/A", "[N/A]", "NA", "NONE"})


def strip_ansi(text: str) -> str:
    """Text without ANSI CSI escapes (colours, underline in `topo -m`)."""
    # Most outputs carry no escape at all: a substring test is much cheaper than a regex pass.
    return _ANSI.sub("", text) if "\x1b" in text else text


def first_line(text: str) -> str:
    """The first non-blank line, stripped and cut to 120 characters: the sample a ParseError quotes."""
    return next((line.strip()[:120] for line in text.splitlines() if line.strip()), "")


def natural_key(name: str) -> tuple[str | int, ...]:
    """Sort key that orders digit runs by value: mlx5_2 before mlx5_10, HGX_FW_GPU_2 before HGX_FW_GPU_10."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGIT_RUNS.split(name))


def split_kv(line: str, sep: str = ":") -> tuple[str, str] | None:
    """'  Key   : value ' -> ('Key', 'value'); None when the line has no separator."""
    key, found, value = line.partition(sep)
    if not found:
        return None
    return key.strip(), value.strip()


def na_to_none(value: str | None) -> str | None:
    """nvidia-smi spells a missing value N/A, [N/A], [Not Supported] and friends."""
    if value is None:
        return None
    v = value.strip()
    if not v or v.upper() in _MISSING or (v[0] == "[" and v[-1] == "]"):
        return None
    return v


def to_int(value: str | None) -> int | None:
    v = na_to_none(value)
    if v is None:
        return None
    m = _INT.match(v.replace(",", ""))
    return int(m.group(0)) if m else None


def to_float(value: str | None) -> float | None:
    v = na_to_none(value)
    if v is None:
        return None
    m = _FLOAT.match(v.replace(",", ""))
    return float(m.group(0)) if m else None


@dataclass(slots=True)
class Node:
    """One line of an indentation-structured listing (nvidia-smi -q, ibstat) and its children."""

    key: str
    value: str | None
    indent: int
    children: list[Node] = field(default_factory=list)

    def child(self, key: str) -> Node | None:
        for c in self.children:
            if c.key == key:
                return c
        return None

    def get(self, *path: str) -> str | None:
        node: Node | None = self
        for k in path:
            node = node.child(k) if node else None
        return node.value if node else None


def indent_tree(text: str, sep: str = ":") -> Node:
    """Parse 'Key : value' lines nested by indentation (TABs count as 8 columns).

    A line's parent is the nearest earlier line with a smaller indent (only leading spaces count); a line
    without `sep` is a title with no value. nvidia-smi -q prints ~1,600 lines per 8-GPU host, so this loop
    is kept to the few str methods each line needs.
    """
    lines = text.splitlines()
    if "\t" in text:
        lines = [line.expandtabs(8) for line in lines]
    root = Node("", None, -1)
    stack = [root]
    last = root  # stack[-1]: the previous line, the likeliest parent of the next one
    for line in lines:
        line = line.rstrip()
        if not line:
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, found, value = line.partition(sep)
        node = Node(key.strip(), (value.strip() or None) if found else None, indent)
        if last.indent >= indent:
            stack.pop()
            while stack[-1].indent >= indent:
                stack.pop()
            last = stack[-1]
        last.children.append(node)
        stack.append(node)
        last = node
    return root
