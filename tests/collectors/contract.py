"""Shared collector-test assertions: fragments match their schema, schemas are closed and described, tables."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fabricproof.collectors.base import Collector
from jsonschema import Draft202012Validator

#: collector id -> (the tool's argv, facts pointer it provides, part of the default collection set); a guard for an
#: optional prerequisite around the argv is the business of tests/collectors/test_requires.py
CollectorTable = Mapping[str, tuple[tuple[str, ...], str, bool]]


def assert_valid(schema: Mapping[str, Any], fragment: Any) -> None:
    """The fragment is a JSON document and valid against the schema; a failure names the first few paths."""
    json.dumps(fragment)
    errors = sorted(Draft202012Validator(dict(schema)).iter_errors(fragment), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{e.json_path}: {e.message}" for e in errors[:5])


def _objects(schema: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (JSON path, node) with "properties", nullable objects included."""
    if isinstance(schema, dict):
        if "properties" in schema:
            yield path, schema
        for key, value in schema.items():
            yield from _objects(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _objects(value, f"{path}[{i}]")


def assert_closed_and_described(schema: Mapping[str, Any]) -> None:
    """A valid 2020-12 schema whose every object forbids unknown keys and describes itself and each property."""
    Draft202012Validator.check_schema(dict(schema))
    for path, obj in _objects(dict(schema)):
        assert obj.get("additionalProperties") is False, f"{path} is open"
        assert obj.get("description"), f"{path} has no description"
        for prop, sub in obj["properties"].items():
            assert sub.get("description"), f"{path}.{prop} has no description"


def assert_collector_table(collectors: Iterable[Collector], expected: CollectorTable) -> None:
    """Exactly these collector ids, each with this argv, facts pointer and default-set membership."""
    actual = {c.id: (c.tool_argv, c.provides, c.default) for c in collectors}
    # pytest does not rewrite asserts in this helper module, so the message spells out the difference
    ids = sorted(actual.keys() | expected.keys())
    wrong = {cid: actual.get(cid) for cid in ids if actual.get(cid) != expected.get(cid)}
    assert not wrong, f"collector table differs; actual (None: not declared): {wrong}"
