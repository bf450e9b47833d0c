"""Thin Typer sub-apps, one per command group."""
