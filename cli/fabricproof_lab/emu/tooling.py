"""What every emulated tool shares: its result type, a refusal that changes nothing, and reading a node."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .model import Node
from .store import load

Result = tuple[str, str, int]  # stdout, stderr, exit status
Handler = Callable[[Path, list[str]], Result]


class Abort(Exception):
    """A tool refuses: raised inside a store.transaction it leaves the node unsaved (the real tool changed nothing)."""

    def __init__(self, out: str, err: str, rc: int) -> None:
        super().__init__(err)
        self.result = (out, err, rc)


class HangRequested(Exception):
    """The tool should hang (tool-hangs fault); the entry point sleeps until its caller goes away."""


def read(node_dir: Path) -> Node:
    """The stored node (no fault overlays)."""
    return load(node_dir)
