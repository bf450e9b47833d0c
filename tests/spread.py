"""Where the long tests go in the run: spread over every xdist worker's share instead of in one block at the end."""

from __future__ import annotations

import pytest

#: The longest test files, longest first (summed test wall of one full run, 2026-12-02, ./cpukit.py): in collection
#: order the rollout rehearsals came last, so every worker ended on them and the run on its longest tests.
LONG = (
    "tests/rollout/test_lab_rehearsals.py",      # 8 tests, 1,052 s
    "tests/rollout/test_lab_kill_resume.py",     # 4 tests, 551 s
    "tests/lab/test_fault_matrix.py",            # 4 tests, 370 s
    "tests/lab/test_fabric_wire_lab.py",         # 5 tests, 178-369 s alone (one lab with its fabric; faults 75-79 s)
    "tests/slurm/test_collective.py",            # 12 tests, 229 s (410 before suite-slurm) beside another run, load 15-25
    "tests/slurm/test_collective_fabric.py",     # 3 tests, 67 s (97 before suite-slurm) beside other work, load 11-18
    "tests/lab/test_demo.py",                    # 139 s
    "tests/lab_emu/test_emu_catches.py",         # 139 s; alone, quiet: 8 tests, 15.8 -> 7.7 CPU-s (suite-lab2)
    "tests/reports/test_fleet_outputs.py",       # 134 s; alone: 13 tests, 8.6 -> 7.6 CPU-s (3 runs, suite-lab2)
    "tests/rollout/test_lab_regression_gate.py",  # 132 s
    "tests/rollout/test_lab_declog.py",          # 116 s
    "tests/slurm/test_breaker.py",               # 112 s
    "tests/cli/test_offline_scale.py",           # 110 s
    "tests/slurm/test_real_slurm.py",            # 103 s; 4 tests, 147 s / 35 CPU-s beside other work at load 25-67
    "tests/cli/test_packaging.py",               # 102 s
    "tests/transport/test_flood_lab.py",         # 94 s
    "tests/lab/test_collective_mpirun.py",       # 3 tests, 58-137 s alone (one 4-tray lab; coll-mpirun branch)
    "tests/rollout/test_lab_secrets.py",         # 60 s
)

_SHARED = ("module", "package", "class")
#: The part of a share (by test count) over which its long tests start; the rest is quick tests to end on.
EARLY = 0.6
#: Quick tests before a share's first long one, so that a share a module's tests made a few tests longer than
#: worksteal's cut does not hand its first long test to the previous worker, as its last.
LEAD = 10


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _blocks(items: list[pytest.Item]) -> list[list[pytest.Item]]:
    """Runs of one file, which stay together so its module fixtures start once per worker."""
    blocks: list[list[pytest.Item]] = []
    for item in items:
        if blocks and _file(blocks[-1][0]) == _file(item):
            blocks[-1].append(item)
        else:
            blocks.append([item])
    return blocks


def _shares_fixtures(block: list[pytest.Item]) -> bool:
    for item in block:
        info = getattr(item, "_fixtureinfo", None)
        for defs in (info.name2fixturedefs.values() if info else ()):
            if any(d.scope in _SHARED for d in defs):
                return True
    return False


def spread(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The same items, with the long files' tests placed evenly through each of the `workers` contiguous shares
    xdist's worksteal hands out first (a long file with no module fixture goes test by test, so one file's tests
    run side by side rather than one after another). No test is added, dropped or changed."""
    rank = {name: i for i, name in enumerate(LONG)}
    long_units: list[list[pytest.Item]] = []
    light: list[list[pytest.Item]] = []
    for block in _blocks(items):
        units = [block] if _shares_fixtures(block) else [[item] for item in block]
        (long_units if _file(block[0]) in rank else light).extend(units)
    if workers < 2 or not long_units:
        return items
    long_units.sort(key=lambda unit: rank[_file(unit[0])])  # stable: a file's tests keep their order
    shares: list[list[list[pytest.Item]]] = [[] for _ in range(workers)]
    for i, unit in enumerate(long_units):  # round-robin, longest first: every share gets its part of the longest
        shares[i % workers].append(unit)
    out: list[pytest.Item] = []
    queue = list(light)
    for n, share in enumerate(shares):
        target = (len(items) - len(out)) // (workers - n)  # the count worksteal sends this worker first
        mine: list[list[pytest.Item]] = []
        size = sum(len(u) for u in share)
        while queue and (n == workers - 1 or size < target):
            mine.append(queue.pop(0))
            size += len(mine[-1])
        # the long units spaced evenly over the first part of the share (by test count), the first near its start:
        # each worker begins its longest test early and ends its share on quick tests
        light_count = sum(len(block) for block in mine)
        starts = [min(LEAD, light_count) + j * EARLY * light_count / len(share) for j in range(len(share))]
        placed: list[list[pytest.Item]] = []
        seen, j = 0, 0
        for block in mine:
            while j < len(share) and starts[j] <= seen:
                placed.append(share[j])
                j += 1
            placed.append(block)
            seen += len(block)
        placed += share[j:]
        out.extend(item for unit in placed for item in unit)
    assert sorted(map(id, out)) == sorted(map(id, items)), "spread lost or doubled a test"
    return out
