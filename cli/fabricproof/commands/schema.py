"""`fabricproof schema`: export the JSON Schemas for editors, CI linters and other tools."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from ..paths import schemas_dir
from ._common import err_console, input_errors

app = typer.Typer(help="JSON Schemas (2020-12) of baselines, checks, facts, reports, rollout plans and runbooks.", no_args_is_help=True)


@app.command("export")
@input_errors
def export(directory: Annotated[Path, typer.Argument(help="Directory to write *.schema.json into (created if missing).")]) -> None:
    """Write every shipped schema into DIRECTORY.

    Example: fabricproof schema export .schemas && check-jsonschema --schemafile .schemas/baseline.schema.json ...
    """
    directory.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in schemas_dir().glob("*.schema.json"))
    for name in names:
        shutil.copyfile(schemas_dir() / name, directory / name)
    err_console.print(f"wrote {len(names)} schemas to {directory}: {', '.join(names)}")
