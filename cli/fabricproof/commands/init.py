"""`fabricproof init`: a starter directory (inventory, baseline, plan, runbook, config) outside the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import starter
from ..errors import InputError, Problem
from ..fsutil import atomic_write_text
from ._common import console, err_console, input_errors, shown


@input_errors
def init(
    directory: Annotated[Path, typer.Argument(help="Directory to write the starter files into (created if missing).",
                                              show_default=False)],
    platform: Annotated[str, typer.Option("--platform", "-p", help="Which shipped example baseline to start from: "
                                          f"{', '.join(starter.platforms())}.")] = starter.DEFAULT_PLATFORM,
) -> None:
    """Write a starter inventory, baseline, rollout plan, runbook and fabricproof.yaml (the defaults for -b and -i)
    from the shipped examples, each with its schema modeline. Every value to change is marked CHANGE ME.

    Example: fabricproof init --platform dgx-h100 fabric && cd fabric && fabricproof config
    """
    files = starter.files(platform)
    if directory.exists() and not directory.is_dir():
        raise InputError(Problem("init: not a directory", str(directory)))
    # Nothing is overwritten: an operator's edited baseline is worth more than a fresh example.
    present = [name for name in files if (directory / name).exists() or (directory / name).is_symlink()]
    if present:
        raise InputError(Problem(f"init: already holds {', '.join(present)}; nothing was written (remove them, or "
                                 "give another directory)", str(directory)))
    for name, text in files.items():  # configuration, committed and shared: readable by everyone
        atomic_write_text(directory / name, text, mode=0o644)
    err_console.print(f"wrote {len(files)} files to {shown(directory)} (platform {shown(platform)}):",
                      soft_wrap=True, highlight=False)
    for name in files:
        console.print(f"  {shown(directory / name)}", soft_wrap=True, highlight=False)
    err_console.print("next: edit what is marked CHANGE ME, then in that directory: fabricproof config; "
                      "fabricproof baseline show --host node-0001; fabricproof validate", soft_wrap=True,
                      highlight=False)
