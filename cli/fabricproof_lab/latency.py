"""Host-side latency of the lab's tools: `lab up --latency realistic` delays each emulated answer by what the real
tool takes on a real 8-GPU node (fabricproof.durations, each value with its source), slept, not burned; off by default."""

from __future__ import annotations

from fabricproof import durations
from .emu.outputs import COMMANDS
from .errors import LabError

OFF = "off"
REALISTIC = "realistic"
PROFILES = (OFF, REALISTIC)


def check(profile: str) -> str:
    if profile not in PROFILES:
        raise LabError(f"--latency {profile!r}: choose {' or '.join(PROFILES)}")
    return profile


def delays(profile: str) -> dict[str, float]:
    """Output key of the emulated command table -> seconds its answer waits. Spellings that share a key (`nvlink -s`,
    `nvlink --status`) share its delay; commands the durations do not know answer at once."""
    if check(profile) == OFF:
        return {}
    out: dict[str, float] = {}
    for tool, args, key in COMMANDS:
        known = durations.of((tool, *args.split()))
        if known is not None:
            out[key] = known.typical_s
    return out
