"""Shared pytest fixtures: where the real-output corpus lies, and repo paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from labkit import LabFactory, lab_skip_reason

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"real-output corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[LabFactory]:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    factory = LabFactory()
    try:
        yield factory
    finally:
        problems = factory.teardown()
        assert not problems, problems
