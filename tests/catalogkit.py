"""The shipped check catalog, loaded once per test process for the test modules that read it at import."""

from __future__ import annotations

from functools import cache

from fabricproof.judging import catalog
from fabricproof.judging.catalog import Check


@cache
def _shipped() -> tuple[Check, ...]:
    # Every xdist worker collects every module: eleven of them loading the catalog afresh (tests keep no catalog
    # cache between processes, so each load parses ~110 YAML files) cost each worker ~1.6 CPU-s of its collection.
    # Checks are frozen: one loaded list serves them all.
    return tuple(catalog.load())


def shipped_checks() -> list[Check]:
    """`catalog.load()`'s checks (a list of the caller's own)."""
    return list(_shipped())
