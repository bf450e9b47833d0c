"""UTC timestamps in one format for reports, facts, state and decisions; durations as plans and options write them."""

from __future__ import annotations

import re
from datetime import datetime, timezone


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(value: int | str) -> int:
    """Seconds from 90, '90s', '5m' or '1h30m' (the schema has already checked the form)."""
    if isinstance(value, int):
        return value
    m = _DURATION.match(value)
    if not m or not value:
        raise ValueError(f"not a duration: {value!r} (use seconds, or e.g. 90s, 5m, 1h30m)")
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def format_duration(seconds: float) -> str:
    """5400 -> '1h30m'; 45 -> '45s' (for plan summaries)."""
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s or not (h or m) else "")
    return out
