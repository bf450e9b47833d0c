"""Pairing rounds for pairwise probes: each host in at most one pair per round, about log2(n) rounds, and the
localisation round that names the host at fault rather than the pair."""

from __future__ import annotations

import pytest

from fabricproof.probes.pairing import blame, plan_rounds, ring_rounds, run_rounds


def hosts(n: int) -> list[str]:
    return [f"n{i:04d}" for i in range(n)]


@pytest.mark.parametrize("n", [2, 3, 5, 16, 17, 1000])
def test_no_host_is_in_two_pairs_of_one_round_and_the_ring_is_covered(n):
    rounds = plan_rounds(hosts(n))
    for r in rounds:
        members = [h for pair in r for h in pair]
        assert len(members) == len(set(members))
    ring = {frozenset(p) for r in ring_rounds(sorted(hosts(n))) for p in r}
    names = sorted(hosts(n))
    expected = {frozenset((names[i], names[(i + 1) % n])) for i in range(n if n > 2 else 1)}
    assert ring == expected


def test_about_log2_n_rounds():
    assert len(plan_rounds(hosts(16))) == 4   # 2 ring rounds + 2 shuffled
    assert len(plan_rounds(hosts(1000))) == 10  # 2 ring rounds + 8 shuffled
    assert len(plan_rounds(hosts(17))) == 5   # an odd ring needs a third round
    assert plan_rounds(hosts(16), seed=3) == plan_rounds(hosts(16), seed=3)  # a plan can be shown and repeated


def test_a_degraded_host_among_16_is_named_not_its_pairs():
    bad = "n0007"

    def measure(r):
        return {pair: bad not in pair for pair in r}

    results = run_rounds(plan_rounds(hosts(16)), measure)
    verdicts = blame(hosts(16), results)
    assert [h for h, b in verdicts.items() if b.verdict == "at fault"] == [bad]
    assert all(b.verdict == "ok" for h, b in verdicts.items() if h != bad)


def test_a_slow_path_between_two_good_hosts_is_the_pairs_not_a_hosts():
    slow_pair = {"n0003", "n0004"}

    def measure(r):
        return {pair: set(pair) != slow_pair for pair in r}

    verdicts = blame(hosts(16), run_rounds(plan_rounds(hosts(16)), measure))
    assert {h for h, b in verdicts.items() if b.verdict == "pair only"} == slow_pair
    assert not [h for h, b in verdicts.items() if b.verdict == "at fault"]


def test_the_localisation_round_puts_each_host_in_one_pair_even_when_it_passed_many():
    """A reference host passed several pairs: it still serves one suspect only (two at once would share its HCA and
    port; on the lab the extra ones measured nothing)."""
    from fabricproof.probes.pairing import localisation_round

    r = localisation_round([("n0005", "n0006"), ("n0006", "n0007")], ["n0001", "n0001", "n0002", "n0002", "n0003"])
    members = [h for p in r for h in p]
    assert len(members) == len(set(members))
    assert r == (("n0001", "n0005"), ("n0002", "n0006"), ("n0003", "n0007"))

    seen = []

    def measure(rnd):
        members = [h for p in rnd for h in p]
        assert len(members) == len(set(members)), rnd
        seen.append(rnd)
        return {pair: "n0006" not in pair for pair in rnd}

    verdicts = blame(hosts(16), run_rounds(plan_rounds(hosts(16)), measure))
    assert {h for h, b in verdicts.items() if b.verdict != "ok"} == {"n0006"}
