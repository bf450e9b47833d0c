"""Where the suite's time goes: each test phase's wall and CPU (the process and every process below it) to a log.

On when FABRICPROOF_TEST_CPU_LOG names a directory (tests/conftest.py registers the plugin); each xdist worker
appends JSON lines to its own file there (a phase costs about 2 ms of CPU to measure: one /proc walk at each end).
`python tests/cpukit.py DIR` ranks tests and files by CPU and by wait.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

ENV = "FABRICPROOF_TEST_CPU_LOG"
TICK = os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> tuple[float, dict[str, float]]:
    """(CPU s, run-queue s) of the live processes below `root`, the CPU with what each has reaped: the lab's sshd
    is spawned in its own session and waited on only at `lab down`, so the rusage of our children misses it. The
    run-queue time (schedstat) is what a loaded machine adds: ready to run, but no core free."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:  # gone between the listing and the read
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
    children: dict[int, list[int]] = defaultdict(list)
    for pid, ppid in parents.items():
        children[ppid].append(pid)
    total, queued, stack = 0.0, {}, list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0.0)
        queued[str(pid)] = _queued(f"/proc/{pid}/schedstat")
        stack.extend(children.get(pid, ()))
    return total, queued


def _queued(path: str) -> float:
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _sample() -> tuple[float, dict[str, float]]:
    """CPU s of this process and everything below it; run-queue s by task (a process gone by the end of a phase
    takes its queueing with it, so phases compare task by task)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, queued = _tree(os.getpid())
    for t in os.listdir("/proc/self/task"):
        queued["self/" + t] = _queued(f"/proc/self/task/{t}/schedstat")
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + cpu, queued


class CpuLog:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.out = open(directory / f"{worker}.jsonl", "a", encoding="utf-8")  # noqa: SIM115 - closed at exit

    def _phase(self, item: pytest.Item, phase: str):
        wall0, (cpu0, queue0) = time.monotonic(), _sample()
        yield
        wall, (cpu, queue) = time.monotonic() - wall0, _sample()
        self.out.write(json.dumps({"id": item.nodeid, "phase": phase, "wall": round(wall, 4),
                                   "cpu": round(cpu - cpu0, 4),
                                   "queue": round(sum(v - queue0.get(k, 0.0) for k, v in queue.items()), 4)}) + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        yield from self._phase(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        yield from self._phase(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item):
        yield from self._phase(item, "teardown")

    def pytest_unconfigure(self) -> None:
        self.out.close()


def register(config: pytest.Config) -> None:
    directory = os.environ.get(ENV)
    if directory:
        config.pluginmanager.register(CpuLog(Path(directory)), "fabricproof-cpu-log")


def _load(directory: Path) -> dict[str, dict[str, float]]:
    tests: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            t = tests[row["id"]]
            t["wall"] += row["wall"]
            t["cpu"] += row["cpu"]
            t["queue"] += row.get("queue", 0.0)
            t[row["phase"] + "_wall"] += row["wall"]
    return tests


def report(directory: Path, top: int = 20) -> str:
    tests = _load(directory)
    files: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for nodeid, t in tests.items():
        f = files[nodeid.split("::")[0]]
        f["wall"] += t["wall"]
        f["cpu"] += t["cpu"]
        f["queue"] += t["queue"]
        f["n"] += 1
    wall = sum(t["wall"] for t in tests.values())
    cpu = sum(t["cpu"] for t in tests.values())
    queue = sum(t["queue"] for t in tests.values())
    lines = [f"{len(tests)} tests: {wall:.0f} s of test wall (summed over workers), {cpu:.0f} CPU-s, "
             f"{wall - cpu:.0f} s waiting, of which {queue:.0f} s ready to run with no core free (at least)"]

    def table(title: str, rows: dict[str, dict[str, float]], key) -> None:
        lines.append(f"\n{title}\n{'wall':>8} {'cpu':>8} {'wait':>8} {'queue':>8}  name")
        for name, r in sorted(rows.items(), key=lambda kv: -key(kv[1]))[:top]:
            extra = f" ({int(r['n'])} tests)" if "n" in r else ""
            wall, cpu = r["wall"], r["cpu"]
            lines.append(f"{wall:8.1f} {cpu:8.1f} {wall - cpu:8.1f} {r['queue']:8.1f}  {name}{extra}")

    table("tests by wait", tests, lambda r: r["wall"] - r["cpu"])
    table("tests by CPU", tests, lambda r: r["cpu"])
    table("files by wait", files, lambda r: r["wall"] - r["cpu"])
    table("files by CPU", files, lambda r: r["cpu"])
    table("tests by sleep (wait less run-queue)", tests, lambda r: r["wall"] - r["cpu"] - r["queue"])
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 20))
