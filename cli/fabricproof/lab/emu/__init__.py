"""Emulated GPU node: node model, renderers of real tool output, mutating tools and faults (stdlib only)."""
