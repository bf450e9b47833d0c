"""The /subnet facts come from the fabric's diff on the vantage host, never from a command on each host: the subnet.*
checks are skipped where no plan was diffed, no collection runs a `subnet` collector, and a gate reading them asks no
host for anything (pure)."""

from __future__ import annotations

import pytest
from fabricproof.collect import select_collectors
from fabricproof.collectors import COLLECTORS
from fabricproof.errors import InputError
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.evaluate import evaluate
from fabricproof.judging.projection import collectors_read
from fabricproof.model import Outcome
from catalogkit import shipped_checks

SUBNET = [c for c in shipped_checks() if c.family == "subnet"]


def test_without_a_plan_the_subnet_checks_are_skipped_saying_so():
    facts = {"h1": {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": "h1", "collectors": {}}}
    report = evaluate(facts, Baseline("b", {}), SUBNET)
    assert {(r.outcome, r.reason) for r in report.results} == {
        (Outcome.SKIP, "no fabric plan was diffed for this host (--fabric-plan)")}


def test_a_fabric_that_could_not_be_read_leaves_them_unjudged():
    facts = {"h1": {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": "h1",
                    "collectors": {"subnet": {"status": "error", "error": "ibnetdiscover: umad open failed"}}}}
    report = evaluate(facts, Baseline("b", {}), SUBNET)
    assert {r.outcome for r in report.results} == {Outcome.ERROR}


def test_no_collection_runs_the_subnet_collector():
    assert COLLECTORS["subnet"].fabric_scope and not COLLECTORS["subnet"].default
    with pytest.raises(InputError, match="fabric plan's diff"):
        select_collectors(["subnet"])
    assert "subnet" not in collectors_read(SUBNET, COLLECTORS)
