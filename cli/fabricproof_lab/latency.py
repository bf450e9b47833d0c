"""Host-side latency of the lab's tools: `lab up --latency realistic` delays each emulated answer by what the real
tool takes on a real 8-GPU node (fabricproof.tools, each value with its source), slept, not burned; off by default."""

from __future__ import annotations

from fabricproof import tools

from .errors import LabError

OFF = "off"
REALISTIC = "realistic"
PROFILES = (OFF, REALISTIC)


def check(profile: str) -> str:
    if profile not in PROFILES:
        raise LabError(f"--latency {profile!r}: choose {' or '.join(PROFILES)}")
    return profile


def delays(profile: str) -> dict[str, float]:
    """Output key of the emulated command table -> seconds its answer waits: each tool's typical duration, under
    the key all its spellings (`nvlink -s`, `nvlink --status`) share; other commands answer at once."""
    if check(profile) == OFF:
        return {}
    return {tool.key: tool.duration.typical_s for tool in tools.TOOLS.values()}
