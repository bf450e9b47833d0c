"""The one way a probe is declared as a Collector: family perf, facts under /perf/<id>, never in the default set."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..base import Collector


def probe_collector(cid: str, argv: tuple[str, ...], parse: Callable[[str], Any], schema: Mapping[str, Any],
                    description: str, timeout_s: float, corpus: str) -> Collector:
    """argv: the default command line (spec.PROBES builds a host's own from its baseline values)."""
    return Collector(id=cid, argv=argv, parse=parse, provides=f"/perf/{cid}", schema=schema, family="perf",
                     description=description, default=False, loads_fabric=True, timeout_s=timeout_s, corpus=(corpus,))
