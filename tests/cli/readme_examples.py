"""The README's shell examples as a test runs them: fenced `sh` blocks read from a Markdown file, each command
(backslash-continued lines joined, comments dropped) run by bash exactly as printed, with `fabricproof` on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

_FENCE = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.M | re.S)


def section(markdown: Path, heading: str) -> str:
    """The text of one section of a Markdown file: from its heading line to the next heading of that level or
    higher (a `# comment` inside a fenced block is no heading)."""
    level = len(heading.split(" ", 1)[0])
    out: list[str] = []
    fenced = False
    for line in markdown.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        if out and not fenced and re.match(r"#{1,%d} " % level, line):
            break
        if out or line.rstrip("\n") == heading:
            out.append(line)
    return "".join(out)


def commands(text: str) -> list[str]:
    """Every command of every fenced sh block, in order, as printed: continued lines stay continued (bash joins them)."""
    out = []
    for block in _FENCE.findall(text):
        current: list[str] = []
        for line in block.splitlines():
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current.append(line)
            if not line.endswith("\\"):
                out.append("\n".join(current))
                current = []
    return out


def shim(directory: Path) -> Path:
    """A `fabricproof` on PATH that is this interpreter running the package under test (the console script of an
    editable install may point at another checkout)."""
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "fabricproof"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} -m fabricproof "$@"\n')
    exe.chmod(0o755)
    return directory


def run(command: str, cwd: Path, bin_dir: Path, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=timeout, check=False)
