"""`fabricproof config`: the defaults for -b and -i in effect here, and where each comes from."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import typer

from .. import config as settings
from ..errors import InputError
from ._common import console, input_errors, shown


@input_errors
def config(
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
) -> None:
    """Show the default --baseline and --inventory commands take here: an option wins over $FABRICPROOF_BASELINE /
    $FABRICPROOF_INVENTORY, which win over fabricproof.yaml (in the working directory, or $FABRICPROOF_CONFIG).
    A bad config file: exit 2 with its file, line and key."""
    if fmt not in ("text", "json"):
        raise InputError(f"--format {fmt!r}: choose text or json")
    path = settings.config_file()
    effective = settings.effective()
    if fmt == "json":
        doc = {"config_file": str(path) if path else None,
               "settings": {s.name: {"value": s.value, "source": s.source} for s in effective}}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    where = (str(path) if path else f"none (no {settings.FILE_NAME} in {os.getcwd()}, ${settings.CONFIG_ENV} unset)")
    console.print(f"config file: {shown(where)}", soft_wrap=True, highlight=False)
    for s in effective:
        value = s.value if s.value is not None else "(not set)"
        console.print(f"{s.name:<10} {shown(value)}  from {shown(s.source)}", soft_wrap=True, highlight=False)
