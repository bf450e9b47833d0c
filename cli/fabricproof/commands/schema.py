"""`fabricproof schema`: export the JSON Schemas for editors, CI linters and other tools."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from ..errors import InputError, Problem
from ..fsutil import read_chunks, write_target
from ..paths import schemas_dir
from ._common import console, err_console, input_errors, shown

app = typer.Typer(help="JSON Schemas (2020-12) of baselines, checks, facts, reports, rollout plans and runbooks.", no_args_is_help=True)

MODELINE = "# yaml-language-server: $schema={path}"


def _kinds() -> dict[str, str]:
    """Document kind -> its schema file name, as each schema's own `kind` constant says."""
    out = {}
    for path in sorted(schemas_dir().glob("*.schema.json")):
        kind = json.loads(path.read_text(encoding="utf-8")).get("properties", {}).get("kind", {}).get("const")
        if kind:
            out[kind] = path.name
    return out


@app.command("export")
@input_errors
def export(directory: Annotated[Path, typer.Argument(help="Directory to write *.schema.json into (created if missing).")]) -> None:
    """Write every shipped schema into DIRECTORY, and print the modeline that makes an editor load it.

    The yaml-language-server (VS Code's YAML extension, Neovim, Helix, JetBrains) reads a first-line comment
    such as `# yaml-language-server: $schema=.schemas/baseline.schema.json` (relative to the YAML file): every
    example baseline, plan and runbook under inventories/ carries one.

    Example: fabricproof schema export .schemas && check-jsonschema --schemafile .schemas/baseline.schema.json baseline.yaml
    """
    if directory.exists() and not directory.is_dir():
        raise InputError(Problem("schema export: not a directory", str(directory)))
    directory.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in schemas_dir().glob("*.schema.json"))
    for name in names:  # a schema is configuration, read by editors and CI: everyone may read it
        write_target(directory / name, read_chunks(schemas_dir() / name), mode=0o644, option="schema export")
    err_console.print(f"wrote {len(names)} schemas to {shown(directory)}: {', '.join(names)}", soft_wrap=True)
    rel = Path(os.path.relpath(directory.resolve(), Path.cwd()))
    console.print("first line of a YAML file in this directory, by its kind (the path is relative to the file):")
    for kind, name in _kinds().items():
        console.print(f"  {kind:<14} {shown(MODELINE.format(path=(rel / name).as_posix()))}", soft_wrap=True,
                      highlight=False)
