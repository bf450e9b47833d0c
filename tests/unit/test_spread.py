"""The suite's order under xdist (tests/spread.py): the long files spread over every worker's first share."""

from __future__ import annotations

from types import SimpleNamespace

import spread


def item(nodeid: str, scope: str | None = None) -> SimpleNamespace:
    defs = {"f": [SimpleNamespace(scope=scope)]} if scope else {}
    return SimpleNamespace(nodeid=nodeid, _fixtureinfo=SimpleNamespace(name2fixturedefs=defs))


def suite() -> list[SimpleNamespace]:
    quick = [item(f"tests/unit/test_q{f}.py::t{i}") for f in range(40) for i in range(25)]
    shared = [item(f"tests/slurm/test_breaker.py::t{i}", "module") for i in range(4)]  # a module fixture
    rehearsals = [item(f"tests/rollout/test_lab_rehearsals.py::t{i}", "session") for i in range(8)]
    return quick[:600] + shared + quick[600:] + rehearsals  # as collected: the rehearsals last


def shares(items: list, workers: int) -> list[list]:
    """The contiguous shares worksteal sends the workers first."""
    out, start = [], 0
    for n in range(workers):
        size = (len(items) - start) // (workers - n)
        out.append(items[start:start + size])
        start += size
    return out


def test_every_worker_starts_its_long_tests_early_and_ends_on_quick_ones():
    items = suite()
    for workers in (2, 4, 6):
        ordered = spread.spread(items, workers)
        assert sorted(map(id, ordered)) == sorted(map(id, items))
        for share in shares(ordered, workers):
            long_at = [i for i, it in enumerate(share) if it.nodeid.split("::")[0] in spread.LONG]
            assert long_at and max(long_at) < 0.8 * len(share), (workers, long_at, len(share))
        assert shares(items, workers)[-1][-1].nodeid.startswith("tests/rollout/")  # as collected: ends on them


def test_a_file_with_a_module_fixture_stays_together_and_one_worker_or_none_changes_nothing():
    items = suite()
    ordered = spread.spread(items, 4)
    at = [i for i, it in enumerate(ordered) if "test_breaker" in it.nodeid]
    assert at == list(range(at[0], at[0] + 4))
    assert [it.nodeid for it in ordered if "rehearsals" in it.nodeid] != []
    assert spread.spread(items, 0) == items and spread.spread(items, 1) == items
