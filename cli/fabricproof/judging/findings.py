"""Failing items named as operators name them: "GPU 1: 16 of 18 links active", not a JSON pointer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from string import Formatter
from typing import Any

from ..model import Finding
from ..words import counted
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


#: Of one item's failing facts, the one the others follow from, first: a port whose physical state is Disabled is
#: also Down and falls back to rate 10. Reports show the first as the cause and the rest under it; a fact not named
#: here follows every one that is.
CAUSE_ORDER: tuple[str, ...] = ("phys_state", "state", "rate")


def cause_rank(finding: Finding) -> int:
    """Where a finding's fact stands in CAUSE_ORDER (its last pointer segment), len(CAUSE_ORDER) when absent."""
    field = finding.pointer.rsplit("/", 1)[-1]
    return CAUSE_ORDER.index(field) if field in CAUSE_ORDER else len(CAUSE_ORDER)


def fact_words(pointer: str) -> str:
    """A fact pointer as an operator names it: its last field in words, after the object holding it unless that is a
    list item ("/gpu/driver_version" is "gpu driver version", "/gpu/gpus/*/recovery_action" "recovery action")."""
    segs = [p for p in pointer.split("/") if p]
    words = segs[-2:] if len(segs) > 1 and segs[-2] != "*" else segs[-1:]
    return " ".join(words).replace("_", " ") or pointer


def value_words(value: Any) -> str:
    """An expected value in a sentence: as the baseline writes it, but nothing (JSON null) said "absent"."""
    return "absent" if value is None else render_value(value)


def found_sentence(expected: str, value: Any) -> str:
    """What was found, said on its own as the expectation says what should be: "the nv-fabricmanager version is
    535.104.05" beside "the nv-fabricmanager version should be 535.161.08" (its subject, before " should "); the
    value alone when the expectation has no subject."""
    subject = expected.split(" should ", 1)[0] if " should " in expected else ""
    if isinstance(value, Mapping):
        found = ", ".join(f"{k} {value_words(v)}" for k, v in value.items())
    else:
        found = value_words(value) if not isinstance(value, str) else value or '""'
    return f"{subject} is {found}" if subject else found


def counted_reasons(reasons: Counter[str]) -> str:
    """Every reason hosts gave, most hosts first, each with its count when they differ: "not applicable to platform
    dgx-a100 (...) on 40 hosts; baseline sets no ib.rate on 2 hosts", never one host's reason for all."""
    ranked = reasons.most_common()
    if len(ranked) == 1:
        return ranked[0][0]
    return "; ".join(f"{reason} on {counted(n, 'host')}" for reason, n in ranked)


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


def counted_findings(found: list[Found], expected: Any, template: str) -> tuple[Finding, ...]:
    """Findings for what a count check counted, each value its own name, worded by the check's `finding` template
    ("bridge {value}: ACS enabled" gives "bridge 0000:00:01.0: ACS enabled")."""
    return tuple(Finding(pointer=_pointer(f.path), value=f.value,
                         text=template.format(value=render_value(f.value), expected=render_value(expected)))
                 for f in found if f.value is not None)


def naming_pointers(segs: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The fields that name the items along a fact pointer (segments, '*' for every item): what evaluation reads,
    besides the fact itself, to name a finding."""
    out = []
    for i, seg in enumerate(segs):
        template = ITEMS.get("/" + "/".join(segs[: i + 1])) if seg == "*" else None
        if template:
            out += [(*segs[: i + 1], name) for _, name, _, _ in Formatter().parse(template) if name]
    return out
