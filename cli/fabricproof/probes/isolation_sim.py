"""A modelled fleet for the collective search (pure): bad hosts, hosts that hang, bad pairs, slow leaf uplinks and
leaf-to-leaf paths, noise, and a test's modelled duration; rounds, tests and wall time of the search at any size."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .isolation import SPINES, Outcome, Settings, Verdict, search

NOMINAL_GBPS = 400.0  # an H100 fleet's multi-node all-reduce busbw order (an NDR rail per GPU); only ratios matter
THRESHOLD = 0.85  # of nominal: the least a healthy group reaches
FACTOR = 0.6  # a bad host's figure, of nominal (one of 8 rails down roughly halves a ring's slowest link)
TIMEOUT_S = 600.0  # a hung collective is cancelled at the step's time limit

#: The published comparison: NVIDIA Cluster Readiness Engine on 232 nodes (issue 22).
PUBLISHED = {"source": "NVIDIA Cluster Readiness Engine, as cited in issue 22", "hosts": 232,
             "tests": "22-57", "rounds": 7, "wall": "~28 min", "exhaustive_pairs_wall": "~19 h"}


def modelled_duration_s(hosts: int, figure_ratio: float = 1.0) -> float:
    """A collective's modelled duration: launching the job step and NCCL's set-up (60 s, growing with log2 of the
    hosts: bootstrap and ring/tree building), then an 8 B..8 GiB sweep (60 s at nominal busbw, longer when slow).
    An assumption of this model, stated so the figures can be recomputed with another."""
    return 60.0 + 15.0 * math.log2(max(hosts, 2)) + 60.0 / max(figure_ratio, 0.1)


@dataclass
class Fleet:
    """The modelled truth: what is at fault, and the noise of every figure (a gaussian, `noise` x nominal)."""

    hosts: list[str]
    leaves: dict[str, str]
    bad: dict[str, float] = field(default_factory=dict)
    hangs: set[str] = field(default_factory=set)
    pairs: dict[frozenset[str], float] = field(default_factory=dict)
    uplinks: dict[str, float] = field(default_factory=dict)
    leaf_pairs: dict[frozenset[str], float] = field(default_factory=dict)
    noise: float = 0.03

    def ratio(self, group: Sequence[str]) -> float:
        """The group's figure as a fraction of nominal, noise aside: the bottleneck of its members and paths."""
        members = set(group)
        worst = min([1.0, *(self.bad[h] for h in members if h in self.bad)])
        worst = min([worst, *(f for p, f in self.pairs.items() if p <= members)])
        spanned = {self.leaves[h] for h in members}
        if len(spanned) > 1:
            worst = min([worst, *(f for leaf, f in self.uplinks.items() if leaf in spanned)])
            worst = min([worst, *(f for p, f in self.leaf_pairs.items() if p <= spanned)])
        return worst

    def outcome(self, group: Sequence[str], rng: random.Random) -> Outcome:
        if self.hangs & set(group):
            return Outcome.failed(f"step cancelled at its time limit ({TIMEOUT_S:g} s): no row printed", "timeout")
        return Outcome(round(NOMINAL_GBPS * self.ratio(group) * (1.0 + rng.gauss(0.0, self.noise)), 2))


def build(hosts: int, bad: int = 1, seed: int = 0, leaf_size: int = 32, noise: float = 0.03, factor: float = FACTOR,
          hangs: int = 0, pairs: int = 0, uplinks: int = 0, leaf_pairs: int = 0) -> Fleet:
    """N hosts in leaves of `leaf_size`, with the faults drawn at random from `seed`."""
    rng = random.Random(seed)
    names = [f"node{i:05d}" for i in range(hosts)]
    fleet = Fleet(names, {h: f"leaf{i // leaf_size:03d}" for i, h in enumerate(names)}, noise=noise)
    chosen = rng.sample(names, bad + hangs + 2 * pairs)
    fleet.bad = {h: factor for h in chosen[:bad]}
    fleet.hangs = set(chosen[bad:bad + hangs])
    rest = chosen[bad + hangs:]
    fleet.pairs = {frozenset(rest[i:i + 2]): factor for i in range(0, 2 * pairs, 2)}
    leaf_names = sorted(set(fleet.leaves.values()))
    picked = rng.sample(leaf_names, min(len(leaf_names), uplinks + 2 * leaf_pairs))
    fleet.uplinks = {leaf: factor for leaf in picked[:uplinks]}
    rest_leaves = picked[uplinks:]
    fleet.leaf_pairs = {frozenset(rest_leaves[i:i + 2]): factor for i in range(0, 2 * leaf_pairs, 2)}
    return fleet


@dataclass
class Runner:
    """The search's `run`: each group's outcome from the fleet, and the round's modelled time (its slowest test)."""

    fleet: Fleet
    rng: random.Random
    wall_s: float = 0.0
    tests: int = 0

    def __call__(self, groups: list[list[str]]) -> list[Outcome]:
        outs = [self.fleet.outcome(g, self.rng) for g in groups]
        self.tests += len(groups)
        self.wall_s += max(TIMEOUT_S if o.failure else modelled_duration_s(len(g), o.figure / NOMINAL_GBPS)
                           for g, o in zip(groups, outs, strict=True))
        return outs


def score(fleet: Fleet, verdict: Verdict) -> dict[str, int]:
    """Against the truth: each finding that names something not at fault is a false accusation; each fault not
    named is missed (a hang counts as a bad host)."""
    truth_hosts = set(fleet.bad) | fleet.hangs
    truth_paths = {(leaf, SPINES) for leaf in fleet.uplinks} | {tuple(sorted(p)) for p in fleet.leaf_pairs}
    false = [f for f in verdict.findings if
             (f.kind == "host" and f.members[0] not in truth_hosts)
             or (f.kind == "pair" and frozenset(f.members) not in fleet.pairs)
             or (f.kind == "path" and f.members not in truth_paths)]
    found = ({m for f in verdict.findings if f.kind == "host" for m in f.members}
             | {frozenset(f.members) for f in verdict.findings if f.kind == "pair"}
             | {f.members for f in verdict.findings if f.kind == "path"})
    missed = (len(truth_hosts - found) + len(set(fleet.pairs) - found) + len(truth_paths - found))
    return {"false_accusations": len(false), "missed": missed}


def settings(group_size: int | None = None) -> Settings:
    return Settings(threshold=NOMINAL_GBPS * THRESHOLD, margin=0.05, retests=2, group_size=group_size)


def simulate(fleet: Fleet, seed: int, use_leaves: bool = True) -> dict[str, Any]:
    """One search over the fleet: its rounds, tests, modelled wall time and score."""
    runner = Runner(fleet, random.Random(seed))
    verdict = search(fleet.hosts, runner, settings(), leaves=fleet.leaves if use_leaves else None)
    return {"rounds": verdict.rounds, "tests": runner.tests, "wall_s": runner.wall_s, **score(fleet, verdict)}


def exhaustive(hosts: int) -> dict[str, Any]:
    """Every pair once: N(N-1)/2 tests in N-1 rounds (a round-robin), each round a pair test's modelled time."""
    rounds = hosts - 1 if hosts % 2 == 0 else hosts
    return {"tests": hosts * (hosts - 1) // 2, "rounds": rounds,
            "wall_h": round(rounds * modelled_duration_s(2) / 3600, 1)}


def bench(hosts: int, bad: int, runs: int, seed: int, noise: float = 0.03, use_leaves: bool = True,
          **faults: int) -> dict[str, Any]:
    """`runs` seeded fleets and searches: the figures issue 22 asks for, beside exhaustive pairs and the published
    232-node ones."""
    results = [simulate(build(hosts, bad, seed + i, noise=noise, **faults), seed + i, use_leaves)
               for i in range(runs)]
    rounds = [r["rounds"] for r in results]
    tests = [r["tests"] for r in results]
    walls = [r["wall_s"] for r in results]
    return {"hosts": hosts, "bad": bad, **faults, "leaves_known": use_leaves, "runs": runs, "seed": seed,
            "noise_pct": round(noise * 100, 3), "rounds_max": max(rounds), "rounds_median": statistics.median(rounds),
            "tests_median": statistics.median(tests), "tests_max": max(tests),
            "wall_min_median": round(statistics.median(walls) / 60, 1), "wall_min_max": round(max(walls) / 60, 1),
            "false_accusations": sum(r["false_accusations"] for r in results),
            "missed": sum(r["missed"] for r in results), "exhaustive_pairs": exhaustive(hosts),
            "published_232": PUBLISHED,
            "model": {"test_s": "60 + 15 log2(hosts) + 60 / (figure / nominal)", "timeout_s": TIMEOUT_S,
                      "threshold": THRESHOLD, "factor": FACTOR}}

__all__ = ["PUBLISHED", "Fleet", "Runner", "bench", "build", "exhaustive", "score", "simulate", "modelled_duration_s"]
