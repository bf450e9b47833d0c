"""Assemble schemas/facts.schema.json from the fragment schemas the collectors declare."""

from __future__ import annotations

import json
from typing import Any

from .collectors import COLLECTORS
from .judging.pointer import split_pointer
from .transport import TRANSPORTS

SCHEMA_ID = "https://fabricproof.dev/schemas/facts.schema.json"

#: `via` values that name no transport: facts documents written by hand (via: fixture) stay valid.
HAND_WRITTEN = ("fixture",)

_COLLECTOR_RUN = {
    "type": "object",
    "description": "How one collector fared on this host.",
    "additionalProperties": False,
    "required": ["status"],
    "properties": {
        "status": {"enum": ["ok", "error", "skipped"], "description": "ok: parsed; error: command or parser failed; skipped: not run."},
        "error": {"type": "string", "description": "One-line reason when status is error or skipped."},
        "exit_code": {"type": ["integer", "null"], "description": "Exit status of the command (null when it did not finish)."},
        "evidence": {"type": "string", "description": "Path of the saved raw output, relative to the run directory."},
        "duration_s": {"type": "number", "description": "Wall time of the command in seconds."},
        "command": {"type": "string", "description": "The command that ran, for display."},
        "notes": {"type": "array", "items": {"type": "string"},
                  "description": "What the parser noticed about partial or malformed output (a copy of the fragment's notes)."},
    },
}


def _insert(root: dict[str, Any], pointer: str, schema: Any, desc: str) -> None:
    parts = split_pointer(pointer)
    node = root
    for part in parts[:-1]:
        props = node.setdefault("properties", {})
        node = props.setdefault(
            part,
            {"type": "object", "additionalProperties": False, "description": f"Facts under {part}.", "properties": {}},
        )
    node.setdefault("properties", {})
    if parts[-1] in node["properties"]:
        return  # alternative collectors (e.g. -q text and -q -x XML) share one fragment schema
    node["properties"][parts[-1]] = {**schema, "description": schema.get("description", desc)}


def build() -> dict[str, Any]:
    doc: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "fabricproof facts",
        "description": "Everything fabricproof learned about one host in one collection, parsed from raw tool output.",
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "host", "collectors"],
        "properties": {
            "apiVersion": {"const": "fabricproof/v1", "description": "Document format version."},
            "kind": {"const": "Facts", "description": "Document kind."},
            "host": {"type": "string", "minLength": 1, "description": "Inventory hostname."},
            "collected_at": {"type": "string", "description": "UTC time of collection (ISO 8601)."},
            "via": {"enum": [*TRANSPORTS, *HAND_WRITTEN], "description": "Transport that gathered the raw output."},
            "groups": {"type": "array", "items": {"type": "string"}, "description": "Inventory groups of the host at collection time."},
            "collectors": {
                "type": "object",
                "description": "Per collector id: whether it ran and parsed.",
                "additionalProperties": _COLLECTOR_RUN,
            },
        },
    }
    for c in sorted(COLLECTORS.values(), key=lambda c: c.provides):
        _insert(doc, c.provides, dict(c.schema), c.description)
    return doc


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":  # regenerate: python -m fabricproof.factschema > schemas/facts.schema.json
    print(render(), end="")
