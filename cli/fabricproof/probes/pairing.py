"""Pairing rounds for pairwise probes (pure): who tests whom, each host in at most one pair per round, and which
host of a slow pair is at fault."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Pair = tuple[str, str]  # (server, client)
Round = tuple[Pair, ...]


def ring_rounds(hosts: Sequence[str]) -> list[Round]:
    """Every host with its ring neighbour: the even edges, then the odd ones (and, for an odd count, the edge that
    closes the ring). Each host is in at most one pair per round."""
    n = len(hosts)
    if n < 2:
        return []
    edges = [(hosts[i], hosts[(i + 1) % n]) for i in range(n if n > 2 else 1)]
    rounds: list[list[Pair]] = []
    for edge in edges:  # greedy by ring order: two rounds for an even ring, three for an odd one
        for r in rounds:
            if not {edge[0], edge[1]} & {h for p in r for h in p}:
                r.append(edge)
                break
        else:
            rounds.append([edge])
    return [tuple(r) for r in rounds]


def shuffled_round(hosts: Sequence[str], rng: random.Random) -> Round:
    """A random matching of all hosts (one left out when the count is odd)."""
    order = list(hosts)
    rng.shuffle(order)
    return tuple((order[i], order[i + 1]) for i in range(0, len(order) - 1, 2))


def default_shuffles(n: int, ring: int) -> int:
    """Shuffled matchings beside the `ring` rounds, so a run takes about log2(n) rounds in all (at least one:
    a ring alone pairs every host with its neighbours only)."""
    return max(1, math.ceil(math.log2(n)) - ring) if n > 2 else 0


def plan_rounds(hosts: Sequence[str], shuffles: int | None = None, seed: int = 0) -> list[Round]:
    """The ring, then `shuffles` random matchings (default: about log2(n) rounds in all). Deterministic for a seed,
    so a run's pairs can be planned, shown (dry run) and repeated."""
    hosts = sorted(hosts)
    rng = random.Random(seed)
    rounds = ring_rounds(hosts)
    for _ in range(default_shuffles(len(hosts), len(rounds)) if shuffles is None else shuffles):
        rounds.append(shuffled_round(hosts, rng))
    return rounds


@dataclass(frozen=True)
class Blame:
    """What the pairs say about one host."""

    host: str
    verdict: str  # "ok" | "at fault" | "pair only" (slow only with one partner) | "untested"
    slow_with: tuple[str, ...] = ()
    good_with: tuple[str, ...] = ()


def localisation_round(slow: Sequence[Pair], passed: Sequence[str]) -> Round:
    """Re-pair each member of a slow pair with a host that passed every pair it was in, one suspect per reference
    host and each host in one pair: the round that tells a bad host from a bad pairing. Suspects left without a
    reference (too few good hosts) are not paired."""
    suspects = sorted({h for pair in slow for h in pair})
    references = [h for h in sorted(set(passed)) if h not in suspects]  # a host passes many pairs: one pair each
    return tuple((ref, suspect) for ref, suspect in zip(references, suspects, strict=False))


def blame(hosts: Sequence[str], results: Mapping[Pair, bool]) -> dict[str, Blame]:
    """Per host, from every pair measured (True: fast enough): slow with every partner -> at fault; slow only with
    partners that are themselves at fault -> ok; slow with a partner that is fine elsewhere -> that pairing (a
    path between the two), not the host; never slow -> ok."""

    def partners(host: str, ok: bool) -> tuple[str, ...]:
        return tuple(sorted(b if a == host else a for (a, b), fine in results.items() if host in (a, b) and fine is ok))

    slow = {h: partners(h, False) for h in hosts}
    good = {h: partners(h, True) for h in hosts}
    at_fault = {h for h in hosts if slow[h] and not good[h]}
    out: dict[str, Blame] = {}
    for host in hosts:
        if not slow[host] and not good[host]:
            verdict = "untested"
        elif host in at_fault:
            verdict = "at fault"
        elif all(p in at_fault for p in slow[host]):
            verdict = "ok"
        else:
            verdict = "pair only"
        out[host] = Blame(host, verdict, slow[host], good[host])
    return out


def run_rounds(rounds: Sequence[Round], measure: Callable[[Round], Mapping[Pair, bool]]) -> dict[Pair, bool]:
    """Measure each round (its pairs at once: no host is in two), then one localisation round for the slow pairs."""
    results: dict[Pair, bool] = {}
    for r in rounds:
        results.update(measure(r))
    slow = [p for p, ok in results.items() if not ok]
    if slow:
        suspects = {h for p in slow for h in p}
        passed = [h for p in results for h in p if h not in suspects]
        extra = localisation_round(slow, passed)
        if extra:
            results.update(measure(extra))
    return results
