"""Node state on disk: <node>/state.json written atomically under an fcntl lock per node."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .model import SCHEMA_VERSION, Node

STATE = "state.json"
LOCK = ".lock"


class StateError(RuntimeError):
    """The node directory holds no readable state of this schema version."""


@contextmanager
def locked(node_dir: Path) -> Iterator[None]:
    """Exclusive lock on one node (a read-only fd is enough for flock, so root- or user-owned lock files both work)."""
    fd = os.open(node_dir / LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load(node_dir: Path) -> Node:
    """The stored state of a node."""
    try:
        node = json.loads((node_dir / STATE).read_text())
    except FileNotFoundError:
        raise StateError(f"no lab node at {node_dir} (missing {STATE})") from None
    except json.JSONDecodeError as exc:
        raise StateError(f"{node_dir / STATE}: not JSON ({exc.msg})") from None
    if node.get("schema") != SCHEMA_VERSION:
        raise StateError(f"{node_dir / STATE}: schema {node.get('schema')!r}, this lab understands {SCHEMA_VERSION}")
    return node


def save(node_dir: Path, node: Node) -> None:
    """Persist the state (atomic) and re-render every output from it."""
    from .outputs import render_node, write_atomic  # here: a tool that only reads the node never renders

    write_atomic(node_dir / STATE, json.dumps(node, separators=(",", ":")))
    render_node(node_dir, node)


@contextmanager
def transaction(node_dir: Path) -> Iterator[Node]:
    """Load, let the caller mutate, then save and re-render, all under the node lock."""
    with locked(node_dir):
        node = load(node_dir)
        yield node
        save(node_dir, node)
