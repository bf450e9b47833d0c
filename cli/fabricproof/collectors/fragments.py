"""JSON Schema builders for collector fragments."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Schema = dict[str, Any]


def _typed(kind: str, desc: str, nullable: bool) -> Schema:
    return {"type": [kind, "null"] if nullable else kind, "description": desc}


def string(
    desc: str, nullable: bool = False, *, enum: Sequence[str | None] | None = None, pattern: str | None = None
) -> Schema:
    """A string (or null when nullable); enum and pattern narrow it further."""
    schema = _typed("string", desc, nullable)
    if enum is not None:
        schema["enum"] = list(enum)
    if pattern is not None:
        schema["pattern"] = pattern
    return schema


def integer(desc: str, nullable: bool = False) -> Schema:
    return _typed("integer", desc, nullable)


def number(desc: str, nullable: bool = False) -> Schema:
    return _typed("number", desc, nullable)


def boolean(desc: str, nullable: bool = False) -> Schema:
    return _typed("boolean", desc, nullable)


def choice(desc: str, values: Sequence[str]) -> Schema:
    """One of fixed values (no "type": the values carry it)."""
    return {"enum": list(values), "description": desc}


def array(desc: str, items: Schema, nullable: bool = False) -> Schema:
    """A list; nullable when null means "not known" (a malformed table, an excerpt), as opposed to empty."""
    return {"type": ["array", "null"] if nullable else "array", "description": desc, "items": items}


def notes(desc: str = "What the parser noticed about partial or odd output.") -> Schema:
    """The notes list a parser returns next to its facts (copied into the collector's run record)."""
    return array(desc, {"type": "string"})


def mapping(desc: str, values: Schema, nullable: bool = False) -> Schema:
    """A name -> value dictionary: open keys (counter names, device names), every value matching `values`."""
    return {"type": ["object", "null"] if nullable else "object", "description": desc, "additionalProperties": values}


def obj(desc: str, props: Mapping[str, Schema], optional: Iterable[str] = (), nullable: bool = False) -> Schema:
    """A closed record: no keys beyond props, and every prop not named in optional is required."""
    skip = set(optional)
    if unknown := skip - props.keys():
        raise ValueError(f"optional names unknown properties: {sorted(unknown)}")
    return {
        "type": ["object", "null"] if nullable else "object",
        "description": desc,
        "additionalProperties": False,
        "required": [k for k in props if k not in skip],
        "properties": dict(props),
    }
