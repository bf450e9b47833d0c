"""Helpers of the probe parser tests: the corpus folders and samples, listed at collection time, and a reader."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from fabricproof.collectors.base import ParseError

from ..contract import assert_closed_and_described, assert_valid

# Same location as the `corpus` fixture (tests/conftest.py); only used to list files at collection time.
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus"
SAMPLES = Path(__file__).resolve().parent / "samples"


def names(family: str) -> list[str]:
    folder = CORPUS / family
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def read(corpus: Path, family: str, name: str) -> str:
    return (corpus / family / name).read_text(encoding="utf-8")


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def parsed_or_failed(corpus: Path, family: str, name: str, parse: Callable[[str], Any], schema: Mapping[str, Any],
                     failures: Mapping[str, str]) -> Any:
    """The fragment of one corpus file, valid against its schema; None for a failed run, once its ParseError has
    been checked against the pattern `failures` gives for it."""
    text = read(corpus, family, name)
    if name in failures:
        with pytest.raises(ParseError, match=failures[name]):
            parse(text)
        return None
    fragment = parse(text)
    assert_valid(schema, fragment)
    return fragment


def assert_family(family: str, count: int, failures: Mapping[str, str], schema: Mapping[str, Any]) -> None:
    """The family holds `count` files (so a new one is noticed), the failed runs among them, and a closed schema."""
    assert len(names(family)) == count and set(failures) <= set(names(family))
    assert_closed_and_described(schema)
