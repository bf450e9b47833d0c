"""Every check passes its pass fixture and fails its fail fixture (one parametrized walk of the catalog)."""

from __future__ import annotations

import pytest
from fabricproof.model import Outcome
from catalogkit import shipped_checks

from .fixturelib import fixture_paths, load_fixture, run_fixture

CHECKS = shipped_checks()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_pass_fixture_passes(check):
    path = fixture_paths(check.id)["pass"]
    report = run_fixture(check, path)
    outcomes = {r.host: r.outcome for r in report.results}
    assert outcomes, f"{path}: the check judged no host"
    assert set(outcomes.values()) == {Outcome.PASS}, [(r.host, r.outcome.value, r.reason) for r in report.results]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_fail_fixture_fails(check):
    path = fixture_paths(check.id)["fail"]
    report = run_fixture(check, path)
    wanted = load_fixture(path).get("expect")  # optional {host: outcome}; default: every host fails
    got = {r.host: r.outcome.value for r in report.results}
    if wanted:
        assert got == wanted, [(r.host, r.outcome.value, r.reason) for r in report.results]
    else:
        assert got and set(got.values()) == {"fail"}, [(r.host, r.outcome.value, r.reason) for r in report.results]
    for r in report.results:
        if r.outcome is Outcome.FAIL:
            assert r.reason, "a failure must say what differed"
            assert r.remediation == check.remediation
            assert " should " in r.expected
