"""Emulated GPU node: node model, renderers of real tool output, mutating tools and faults (stdlib only).

Self-contained: copied into a lab dir and run by /usr/bin/python3 as the lab user, so it imports nothing
outside the standard library, this package and the product's tools vocabulary (fabricproof.tools, plain data,
copied beside it). The runtime's entry points (install, create_node, inject, clear, FAULTS) load lazily, so an
emulated tool that only needs cli.py stays cheap to start.
"""

from __future__ import annotations

__all__ = ["FAULTS", "active_faults", "cable_node", "clear", "create_node", "inject", "install", "node_path", "read_node",
           "view_node"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
