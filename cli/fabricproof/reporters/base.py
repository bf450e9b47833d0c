"""The reporter type: a named renderer from one Report to one string."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..model import Report


@dataclass(frozen=True)
class Reporter:
    """One output format.

    render is pure: it returns the whole document as a string and never prints or writes, so
    the CLI decides where it goes (stdout, a file named with `extension`, a CI summary).
    """

    name: str
    extension: str  # default file suffix, without the dot
    description: str
    render: Callable[[Report], str]
    # The same text in pieces, for formats whose documents grow with the fleet: written as made, a
    # large report never sits in memory whole. None: the one piece render() returns.
    chunks: Callable[[Report], Iterable[str]] | None = None

    def pieces(self, report: Report) -> Iterable[str]:
        return self.chunks(report) if self.chunks is not None else (self.render(report),)
