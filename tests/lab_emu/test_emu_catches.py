"""Each fault is caught by exactly the checks its catalog entry names, judged by the real check catalog
against the example baseline of its profile (inventories/<profile>/baseline.yaml); a fresh node passes."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from fabricproof.judging import baseline as baselines
from fabricproof import facts
from fabricproof.judging import catalog, evaluate
from fabricproof_lab.emu import faults, model
from fabricproof_lab.emu.faults import FAULTS
from fabricproof.model import Outcome

from .lablib import command_results

REPO = Path(__file__).resolve().parents[2]
PROFILES = ("dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72")


@pytest.fixture(scope="module")
def checks() -> list:
    return catalog.load(REPO / "checks")


def _node(profile: str, index: int) -> dict:
    rack = 1 if profile == "gb200-nvl72" else None
    node = model.new_node(profile, index, rack, f"n-{index:04d}", f"127.10.0.{index + 1}")
    node["imex_peers"] = ["127.10.0.2", "127.10.0.3", "127.10.0.4"] if rack else []
    return node


#: Rendering and parsing are pure functions of a node's state, and many reads here are alike: a profile's fresh and
#: cleared nodes are one state (~70 times a profile), and most faults print the same before and after a tick. So each
#: distinct state is rendered once ((host, the state as JSON) -> its facts) and each distinct set of outputs parsed
#: once ((host, the outputs) -> its facts).
_BY_STATE: dict[tuple[str, str], dict] = {}
_BY_OUTPUTS: dict[tuple, dict] = {}
#: (profile, id of the checks and of each facts document) -> the failed checks: judging is pure too, and the facts
#: above live for the whole module, so a cleared node (the same facts each time) is judged once a profile.
_JUDGED: dict[tuple[str, int, int, int, int], dict[str, set[str]]] = {}


def _facts(node: dict, host: str) -> dict:
    state = (host, json.dumps(node))
    if state not in _BY_STATE:
        outputs = command_results(faults.view(node))
        key = (host, tuple(outputs.items()))
        if key not in _BY_OUTPUTS:
            _BY_OUTPUTS[key] = facts.build(host, outputs, via="replay")
        _BY_STATE[state] = _BY_OUTPUTS[key]
    return _BY_STATE[state]


@cache
def _baseline(profile: str) -> baselines.Baseline:
    return baselines.load(REPO / "inventories" / profile / "baseline.yaml")


def _judge(profile: str, checks: list, healthy: dict, current: dict, previous: dict) -> dict[str, set[str]]:
    key = (profile, id(checks), id(healthy), id(current), id(previous))
    if key not in _JUDGED:
        groups = {h: ["rack_01"] for h in ("a", "b")} if profile == "gb200-nvl72" else {}
        report = evaluate.evaluate({"a": healthy, "b": current}, _baseline(profile), checks, groups=groups,
                                   previous={"a": healthy, "b": previous})
        out: dict[str, set[str]] = {"a": set(), "b": set()}
        for r in report.results:
            if r.outcome is Outcome.FAIL:
                out[r.host].add(r.check_id)
        _JUDGED[key] = out
    return {host: set(ids) for host, ids in _JUDGED[key].items()}


@pytest.mark.parametrize("profile", PROFILES)
def test_a_fresh_node_passes_its_example_baseline(profile: str, checks: list) -> None:
    a, b = _facts(_node(profile, 1), "a"), _facts(_node(profile, 2), "b")
    failed = _judge(profile, checks, a, b, b)
    assert failed == {"a": set(), "b": set()}, (
        f"inventories/{profile}/baseline.yaml disagrees with lab/emu/profiles.py: {sorted(failed['a'])}")


@pytest.mark.parametrize("profile", PROFILES)
def test_each_fault_is_caught_by_exactly_its_catches(profile: str, checks: list) -> None:
    healthy = _facts(_node(profile, 1), "a")
    wrong = {}
    for name, fault in sorted(FAULTS.items()):
        if profile not in fault.profiles:
            continue
        node = _node(profile, 2)
        faults.inject(node, name)
        first = _facts(node, "b")
        node["ticks"] += 1  # a second read (growing counters move between snapshots)
        second = _facts(node, "b")
        got = _judge(profile, checks, healthy, second, first)["b"]
        want = set(fault.catches_for(profile)) | set(fault.catches_over_time) | set(fault.catches_fleet_for(profile))
        if got != want:
            wrong[name] = {"missed": sorted(want - got), "unexpected": sorted(got - want)}
        faults.clear(node, name)
        mended = _facts(node, "b")  # read once: two reads of a cleared node are the same (no tick between them)
        assert _judge(profile, checks, healthy, mended, mended)["b"] == set(), name
    assert not wrong, wrong
