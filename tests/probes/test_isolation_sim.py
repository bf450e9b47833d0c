"""The modelled fleet behind the search's benchmark: a group's figure is the bottleneck of its members and paths,
a hang is a timeout, and the benchmark prints one JSON object with the issue's figures and goals."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest

from fabricproof.probes.isolation_sim import (NOMINAL_GBPS, TIMEOUT_S, Fleet, Runner, bench, build, exhaustive,
                                               modelled_duration_s)

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_isolation.py"


def quiet(**faults) -> Fleet:
    hosts = [f"h{i}" for i in range(8)]
    f = Fleet(hosts, {h: "leafA" if i < 4 else "leafB" for i, h in enumerate(hosts)}, noise=0.0)
    for key, value in faults.items():
        setattr(f, key, value)
    return f


def test_a_group_figure_is_the_bottleneck_of_its_members_and_paths():
    f = quiet(bad={"h1": 0.6}, pairs={frozenset({"h2", "h3"}): 0.5}, uplinks={"leafB": 0.7})
    rng = random.Random(0)
    assert f.outcome(["h0", "h2"], rng).figure == NOMINAL_GBPS
    assert f.outcome(["h0", "h1"], rng).figure == 0.6 * NOMINAL_GBPS
    assert f.outcome(["h2", "h3"], rng).figure == 0.5 * NOMINAL_GBPS  # the pair, only together
    assert f.ratio(["h4", "h5"]) == 1.0 and f.ratio(["h0", "h4"]) == 0.7  # leafB's uplinks, only across leaves
    assert f.ratio(["h1", "h2", "h3", "h4"]) == 0.5


def test_a_host_that_hangs_times_out_every_group_it_is_in_and_the_round_lasts_the_time_limit():
    f = quiet(hangs={"h5"})
    runner = Runner(f, random.Random(0))
    out = runner([["h0", "h1"], ["h4", "h5"]])
    assert out[0].figure == NOMINAL_GBPS and (out[1].kind, out[1].figure) == ("timeout", None)
    assert (runner.tests, runner.wall_s) == (2, TIMEOUT_S)
    assert modelled_duration_s(2) < modelled_duration_s(10000) < TIMEOUT_S


def test_faults_are_drawn_from_the_seed():
    a, b = build(1000, 3, seed=7, hangs=1, pairs=1, uplinks=1), build(1000, 3, seed=7, hangs=1, pairs=1, uplinks=1)
    assert (a.bad, a.hangs, a.pairs, a.uplinks) == (b.bad, b.hangs, b.pairs, b.uplinks)
    assert len(a.bad) == 3 and len(a.hangs) == 1 and len(a.pairs) == 1 and not set(a.bad) & a.hangs
    assert len(set(a.leaves.values())) == 32  # leaves of 32 hosts


def test_exhaustive_pairs():
    assert exhaustive(232) == {"tests": 26796, "rounds": 231, "wall_h": round(231 * modelled_duration_s(2) / 3600, 1)}
    assert exhaustive(1000)["tests"] == 499500 and exhaustive(5)["rounds"] == 5


@pytest.mark.parametrize("hosts, bad, runs, goal", [(1000, 1, 30, 12), (10000, 5, 3, 40)])
def test_the_issue_goals_hold_on_seeded_runs(hosts, bad, runs, goal):
    r = bench(hosts, bad, runs, seed=1)
    assert r["rounds_max"] <= goal and (r["false_accusations"], r["missed"]) == (0, 0)


def test_the_benchmark_prints_one_json_object(capsys):
    spec = importlib.util.spec_from_file_location("bench_isolation", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--hosts", "232", "--bad", "2", "--runs", "5", "--seed", "3", "--noise", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("rounds_max", "rounds_median", "tests_median", "false_accusations", "missed", "wall_min_median",
                "exhaustive_pairs", "published_232"):
        assert key in out
    assert (out["hosts"], out["bad"], out["runs"], out["noise_pct"]) == (232, 2, 5, 3.0)
    assert out["published_232"]["rounds"] == 7 and out["exhaustive_pairs"]["tests"] == 26796
