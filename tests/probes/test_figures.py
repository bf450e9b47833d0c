"""Probe figures (pure): every figure with its unit from a host's facts, worst first, and the regression
comparison a regression gate makes between a host's figures before and after a change."""

from __future__ import annotations

import json

import pytest

from fabricproof.probes.figures import Figure, by_host_rows, of_host, regressions, report_rows, worst_first


def facts(busbw: float, pair_bw: float = 390.0, lat: float = 1.9) -> dict:
    return {"perf": {"nccl_all_reduce": {"busbw_gbps": busbw, "avg_busbw_gbps": busbw / 3},
                     "ib_pair_bw": {"targets": {"h2": {"bw_average_gbps": pair_bw}}},
                     "ib_pair_lat": {"targets": {"h2": {"t_typical_us": lat}}},
                     "nvbandwidth": {"testcases": {"device_to_device_memcpy_read_ce": {
                         "unit": "GB/s", "summary": {"min": 370.5}}}}}}


def test_every_figure_of_a_host_with_its_unit():
    got = {(f.probe, f.target, f.name): (f.value, f.unit, f.higher_is_better) for f in of_host("h1", facts(481.0))}
    assert got == {
        ("nccl_all_reduce", "", "busbw"): (481.0, "GB/s", True),
        ("nccl_all_reduce", "", "avg_busbw"): (481.0 / 3, "GB/s", True),
        ("ib_pair_bw", "h2", "bw_average"): (390.0, "Gb/s", True),
        ("ib_pair_lat", "h2", "t_typical"): (1.9, "us", False),
        ("nvbandwidth", "device_to_device_memcpy_read_ce", "min"): (370.5, "GB/s", True),
    }
    assert list(of_host("h1", {"collectors": {}})) == []


def test_worst_first_is_the_lowest_bandwidth_and_the_highest_latency():
    figs = [f for h, b, lat in (("a", 480, 1.8), ("b", 240, 2.5), ("c", 470, 1.9))
            for f in of_host(h, facts(b, lat=lat))]
    ranked = worst_first(figs)
    busbw = [f.host for f in ranked if f.name == "busbw"]
    lat = [f.host for f in ranked if f.name == "t_typical"]
    assert busbw == ["b", "c", "a"] and lat == ["b", "c", "a"]


def test_a_drop_beyond_the_tolerance_is_a_regression_with_both_figures():
    before = list(of_host("h1", facts(481.0))) + list(of_host("h2", facts(480.0)))
    after = list(of_host("h1", facts(240.5))) + list(of_host("h2", facts(470.0)))  # h2: 97.9%, within 3%
    got = regressions(before, after, {"nccl_all_reduce.busbw": 3, "*": 50})
    assert list(got) == ["h1"]
    assert got["h1"] == ["nccl_all_reduce busbw 240.5 GB/s is 50.0% of 481 GB/s before the change (at least 97%)"]


def test_latency_regresses_when_it_grows():
    before = [Figure("h1", "ib_pair_lat", "h2", "t_typical", 2.0, "us", False)]
    after = [Figure("h1", "ib_pair_lat", "h2", "t_typical", 2.2, "us", False)]
    assert regressions(before, after, 5)["h1"][0].startswith("ib_pair_lat h2 t_typical 2.2 us is 90.9% of 2 us")
    assert not regressions(before, after, 10)


@pytest.mark.parametrize("missing_fails", [True, False])
def test_a_figure_measured_before_and_not_after(missing_fails):
    before = [Figure("h1", "nccl_all_reduce", "", "busbw", 481.0, "GB/s")]
    got = regressions(before, [], 3, missing_fails=missing_fails)
    assert bool(got) is missing_fails


def test_a_figure_round_trips_through_the_row_rollout_state_and_decisions_keep():
    """One typed (de)serialiser: the row (without the host, which keys it) reads back as the same Figure."""
    f = Figure("h1", "ib_pair_lat", "h2", "t_typical", 1.9, "us", False)
    row = f.to_dict()
    assert row == {"probe": "ib_pair_lat", "target": "h2", "figure": "t_typical", "value": 1.9, "unit": "us",
                   "higher_is_better": False}
    assert Figure.from_dict("h1", json.loads(json.dumps(row))) == f
    assert by_host_rows({"h1": [f]}) == {"h1": [row]}
    assert report_rows([f]) == ({"host": "h1", **row},)  # the JSON report's row: the host first
