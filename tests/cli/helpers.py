"""Run the real CLI app in-process and build small valid inputs for it."""

from __future__ import annotations

import json
from pathlib import Path

from fabricproof.cli import app
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
H100_BASELINE = REPO / "inventories" / "dgx-h100" / "baseline.yaml"


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def write_facts(directory: Path, host: str = "node1", **sections) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": host, "collectors": {}, **sections}
    path = directory / f"{host}.json"
    path.write_text(json.dumps(doc, indent=2))
    return path
