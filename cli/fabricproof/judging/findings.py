"""Failing items named as operators name them: "GPU 1: 16 of 18 links active", not a JSON pointer."""

from __future__ import annotations

from collections.abc import Mapping
from string import Formatter
from typing import Any

from ..model import Finding
from .ops import render_value
from .pointer import Found

#: How one item of a list in the facts is named, by the list's pointer: fields of the item in braces. The one
#: place that knows; tests/unit/test_findings.py holds every entry against the facts schema.
ITEMS: dict[str, str] = {
    "/gpu/gpus/*": "GPU {index}",
    "/nvlink/status/gpus/*": "GPU {index}",
    "/nvlink/errors/gpus/*": "GPU {index}",
    "/nvlink/status/links/*": "GPU {gpu} link {link}",
    "/nvlink/errors/links/*": "GPU {gpu} link {link}",
    "/nvlink/caps/links/*": "GPU {gpu} link {link}",
    "/ib/ibstat/hcas/*": "{name}",
    "/ib/ibstat/ports/*": "{ca} port {port}",
    "/ib/counters/ports/*": "{device} port {port}",
    "/ib/devinfo/ports/*": "{device} port {port}",
    "/roce/gids/entries/*": "{device} port {port} GID {index}",
    "/topo/gpu_pairs/*": "{a}-{b}",
    "/topo/gpu_nearest_nic/*": "{gpu} to {nic_name}",
}


def _pattern(path: tuple[Any, ...], upto: int) -> str:
    return "/" + "/".join("*" if isinstance(p, int) or i == upto else str(p) for i, p in enumerate(path[: upto + 1]))


def _node(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _item(facts: Mapping[str, Any], path: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """(the name of the outermost named item on the path, the path below it); ("", path) when none is named."""
    for i in range(len(path)):
        template = ITEMS.get(_pattern(path, i))
        if template is None:
            continue
        node = _node(facts, path[: i + 1])
        if isinstance(node, Mapping):
            try:
                return template.format_map(node), path[i + 1:]
            except (KeyError, IndexError, ValueError):
                return "", path
    return "", path


def _pointer(path: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def name_findings(facts: Mapping[str, Any], found: list[Found], expected: Any, template: str = "",
                  delta: bool = False) -> tuple[Finding, ...]:
    """Findings for failing values (for delta checks, each value is the growth): named by ITEMS, worded by the
    check's `finding` template ({value}, {expected}) or as "field = value"."""
    out = []
    for f in found:
        item, rest = _item(facts, f.path)
        value = render_value(f.value)
        if template and item:
            text = template.format(value=value, expected=render_value(expected))
        else:
            field = "/".join(str(p) for p in rest if not isinstance(p, int)) if item else _pointer(f.path)
            text = f"{field} grew by {value}" if delta else (f"{field} = {value}" if field else value)
        out.append(Finding(pointer=_pointer(f.path), value=f.value, item=item, text=text))
    return tuple(out)


def naming_pointers(segs: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The fields that name the items along a fact pointer (segments, '*' for every item): what evaluation reads,
    besides the fact itself, to name a finding."""
    out = []
    for i, seg in enumerate(segs):
        template = ITEMS.get("/" + "/".join(segs[: i + 1])) if seg == "*" else None
        if template:
            out += [(*segs[: i + 1], name) for _, name, _, _ in Formatter().parse(template) if name]
    return out
