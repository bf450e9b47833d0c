"""Small pure text helpers shared by parsers: ANSI stripping, key/value splitting, numbers, indentation trees."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def first_line(text: str) -> str:
    """The first non-blank line, stripped and cut to 120 characters: the sample a ParseError quotes."""
    return next((line.strip()[:120] for line in text.splitlines() if line.strip()), "")


def natural_key(name: str) -> tuple[str | int, ...]:
    """Sort key that orders digit runs by value: mlx5_2 before mlx5_10, HGX_FW_GPU_2 before HGX_FW_GPU_10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def split_kv(line: str, sep: str = ":") -> tuple[str, str] | None:
    """'  Key   : value ' -> ('Key', 'value'); None when the line has no separator."""
    if sep not in line:
        return None
    key, _, value = line.partition(sep)
    return key.strip(), value.strip()


def na_to_none(value: str | None) -> str | None:
    """nvidia-smi spells a missing value N/A, [N/A], [Not Supported] and friends."""
    if value is None:
        return None
    v = value.strip()
    if not v or v.upper() in {"N/A", "[N/A]", "NA", "NONE"} or (v.startswith("[") and v.endswith("]")):
        return None
    return v


def to_int(value: str | None) -> int | None:
    v = na_to_none(value)
    if v is None:
        return None
    m = re.match(r"^[-+]?\d+", v.replace(",", ""))
    return int(m.group(0)) if m else None


def to_float(value: str | None) -> float | None:
    v = na_to_none(value)
    if v is None:
        return None
    m = re.match(r"^[-+]?\d+(?:\.\d+)?", v.replace(",", ""))
    return float(m.group(0)) if m else None


@dataclass
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
    """Parse 'Key : value' lines nested by indentation (TABs count as 8 columns)."""
    root = Node("", None, -1)
    stack = [root]
    for raw in text.splitlines():
        line = raw.expandtabs(8).rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        kv = split_kv(line, sep)
        key, value = (kv[0], kv[1] or None) if kv else (line.strip(), None)
        while stack[-1].indent >= indent:
            stack.pop()
        node = Node(key, value, indent)
        stack[-1].children.append(node)
        stack.append(node)
    return root
