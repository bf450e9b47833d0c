"""Load a check's pass/fail fixture and evaluate the check on it (shared by the catalog tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.catalog import Check
from fabricproof.judging.evaluate import evaluate
from fabricproof.model import Report

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_paths(check_id: str) -> dict[str, Path]:
    return {kind: FIXTURES / check_id / f"{kind}.yaml" for kind in ("pass", "fail")}


def load_fixture(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    hosts = data["facts"]
    for name, facts in hosts.items():
        facts.setdefault("apiVersion", "fabricproof/v1")
        facts.setdefault("kind", "Facts")
        facts.setdefault("host", name)
    return data


def run_fixture(check: Check, path: Path) -> Report:
    data = load_fixture(path)
    baseline = Baseline(name="fixture", defaults=data.get("baseline") or {}, groups=data.get("baseline_groups") or {})
    return evaluate(
        data["facts"], baseline, [check], groups=data.get("groups") or {}, previous=data.get("previous"),
    )
