"""Counted nouns in what an operator reads: "1 host", "2 hosts"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun in the number it takes: counted(1, "host") is "1 host", counted(0, "host") "0 hosts"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
