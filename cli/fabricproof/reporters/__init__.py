"""The reporter registry: every output format by name, each rendering one Report to a string."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping

from .base import Reporter

#: Every format by name, in the order --help lists them: the module of reporters/ whose REPORTER renders it. A
#: module is imported only when its format is used: `check --local`, which Slurm runs on every node every few
#: minutes, prints its nhc lines and loads none of them (~0.05 s of CPU a run, the HTML pages' most of it).
MODULES: dict[str, str] = {
    "table": "table",
    "json": "json_report",
    "junit": "junit",
    "sarif": "sarif",
    "tap": "tap",
    "prometheus": "prometheus",
    "markdown": "markdown",
    "html": "html_report",
}


class _Registry(MutableMapping[str, Reporter]):
    """MODULES read as a mapping of names to reporters, each module imported when its reporter is first asked for."""

    def __init__(self, modules: Mapping[str, str]):
        self._entries: dict[str, str | Reporter] = dict(modules)

    def __getitem__(self, name: str) -> Reporter:
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._entries[name] = importlib.import_module(f"{__name__}.{entry}").REPORTER
        return entry

    def __setitem__(self, name: str, reporter: Reporter) -> None:
        self._entries[name] = reporter

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"REPORTERS({', '.join(self._entries)})"


REPORTERS: MutableMapping[str, Reporter] = _Registry(MODULES)

__all__ = ["MODULES", "REPORTERS", "Reporter"]
