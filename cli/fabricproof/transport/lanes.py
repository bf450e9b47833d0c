"""Which of a host's commands run at the same time (pure): a tool's commands in one lane, in order; the rest packed
beside them, so that a host takes about as long as its longest chain instead of the sum of its commands."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ..model import Command

#: What a command of unknown duration weighs: it still costs the host a fork and an exec.
UNKNOWN_S = 0.01
#: Lanes on one host at most: each is a process on the host, and more than this gains nothing on real nodes.
MAX_LANES = 8

Lanes = tuple[tuple[int, ...], ...]


def weight(command: Command) -> float:
    return max(command.typical_s, UNKNOWN_S)


def chains(commands: Sequence[Command]) -> list[list[int]]:
    """The units that run in sequence: each tool's commands (in their order), and every tool-less command alone."""
    units: list[list[int]] = []
    of_tool: dict[str, int] = {}
    for i, c in enumerate(commands):
        if c.tool and c.tool in of_tool:
            units[of_tool[c.tool]].append(i)
            continue
        if c.tool:
            of_tool[c.tool] = len(units)
        units.append([i])
    return units


def longest_chain_s(commands: Sequence[Command]) -> float:
    """The shortest time the commands can take on one host, run as concurrently as their tools allow."""
    return max((sum(weight(commands[i]) for i in u) for u in chains(commands)), default=0.0)


def plan(commands: Sequence[Command], max_lanes: int = MAX_LANES) -> Lanes:
    """Command indices per lane, each lane in command order. Chains are packed first-fit, longest first, into lanes
    no longer than the longest chain: as few lanes (host processes) as keep the host at its longest chain."""
    units = chains(commands)
    if not units:
        return ()
    cost = [sum(weight(commands[i]) for i in u) for u in units]
    cap = max(cost) * (1 + 1e-9)
    lanes: list[list[int]] = []
    loads: list[float] = []
    for k in sorted(range(len(units)), key=lambda k: (-cost[k], units[k][0])):
        fit = next((n for n, load in enumerate(loads) if load + cost[k] <= cap), None)
        if fit is None and len(lanes) < max(1, max_lanes):
            lanes.append([])
            loads.append(0.0)
            fit = len(lanes) - 1
        elif fit is None:
            fit = min(range(len(loads)), key=loads.__getitem__)
        lanes[fit].extend(units[k])
        loads[fit] += cost[k]
    return tuple(tuple(sorted(lane)) for lane in sorted(lanes, key=min))


def skip_reason(tool: str, timed_out: Sequence[str], error: str) -> str:
    """Why a command was not run: `timed_out`, a command of the same tool, ran out of time before it (`error`)."""
    return f"not run: {tool} is hung on this host (`{shlex.join(timed_out)}` {error}), so its other commands were not run"
