"""--workers on a real lab: hosts sharded across worker processes into the one run store and the one sink; a killed
worker and Ctrl-C leave a run.json that says which hosts were done. The lab answers with realistic latency, so
hosts take long enough for a kill or an interrupt to land mid-run."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricproof import facts as facts_mod
from fabricproof import inventory as inventory_mod
from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.model import ExitCode
from fabricproof.transport.ssh import SSHOptions

from .labutil import LabFactory, RunningLab

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
#: nvidia-smi nvlink -s answers in 0.3 s on the realistic lab: a host takes about that long.
SLOW = [COLLECTORS["nvlink_status"], COLLECTORS["lsmod"]]
NODES = 8


@pytest.fixture(scope="module")
def slow_lab(transport_labs: LabFactory) -> RunningLab:
    directory = transport_labs.new_dir()
    status = transport_labs.up(directory, nodes=NODES, profile="dgx-h100", latency_profile="realistic")
    assert status.running and status.lab.latency == "realistic"
    return RunningLab(dir=directory, status=status)


@pytest.fixture(scope="module")
def hosts(slow_lab: RunningLab) -> list:
    inv = inventory_mod.load(slow_lab.dir / "inventory.yml")
    return list(inv.hosts.values())


def ssh() -> dict:
    return {"via": "ssh", "options": SSHOptions(default_known_hosts=())}


def test_hosts_are_sharded_across_workers_into_one_run_store_and_one_sink(hosts, tmp_path):
    events, sunk, collector_on = [], {}, set()

    def sink(name: str, doc: dict) -> None:
        sunk[name] = (os.getpid(), doc)
        collector_on.add(gc.isenabled())

    result = collect(hosts, tmp_path / "run", **ssh(), collectors=SLOW, forks=4, workers=2, progress=events.append,
                     sink=sink)
    assert result.exit_code == ExitCode.OK, (result.collection_errors, result.collector_errors)
    # This process only takes JSON documents from the workers: the cyclic collector is paused meanwhile, not after.
    assert collector_on == {False} and gc.isenabled()
    assert result.workers == 2 and result.facts_by_host == {}  # the sink took them
    pids = {e.worker for e in events}
    assert len(pids) == 2 and os.getpid() not in pids and 0 not in pids  # two worker processes, not this one
    by_worker = {pid: sorted(e.host for e in events if e.worker == pid) for pid in pids}
    names = [h.name for h in hosts]
    assert sorted(by_worker.values()) == sorted([sorted(names[0::2]), sorted(names[1::2])])  # round-robin shards
    assert set(sunk) == set(names) and {pid for pid, _ in sunk.values()} == {os.getpid()}  # judged here, as they come
    loaded = facts_mod.load_dir(result.run_dir)  # every worker wrote into the one run store, schema-valid
    assert set(loaded) == set(names) and all(d["nvlink"]["status"]["links_active_total"] > 0 for d in loaded.values())
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["status"] == "complete" and run["workers"] == 2 and run["forks"] == 4
    assert sorted(run["done"]) == sorted(names) and run["pending"] == []


def test_a_killed_worker_leaves_its_unfinished_hosts_recorded_as_not_collected(hosts, tmp_path):
    killed: list[tuple[int, str]] = []

    def kill_the_first_reporter(event) -> None:
        if not killed:
            os.kill(event.worker, signal.SIGKILL)  # our own worker process, by its pid
            killed.append((event.worker, event.host))

    result = collect(hosts, tmp_path / "run", **ssh(), collectors=SLOW, forks=2, workers=2,
                     progress=kill_the_first_reporter)
    victim, its_host = killed[0]
    names = [h.name for h in hosts]
    shard = set(names[0::2]) if its_host in names[0::2] else set(names[1::2])
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["status"] == "complete" and sorted(run["done"]) == sorted(names) and run["pending"] == []
    lost = set(run["errors"])
    assert lost and lost <= shard, run["errors"]  # it had hosts left when it died; only its own are lost
    for host in lost:  # each says why, and none is half collected
        assert run["errors"][host]["message"] == (f"{host}: not collected: the worker process (pid {victim}) "
                                                  f"was killed by SIGKILL")
        assert not (result.run_dir / "facts" / f"{host}.json").exists()
    collected = {p.stem for p in (result.run_dir / "facts").glob("*.json")}
    assert collected == set(names) - lost and run["counts"]["collected"] == len(collected)
    assert set(names) - shard <= collected  # the other worker collected all of its shard


@pytest.mark.parametrize("workers", [2, 1])
def test_ctrl_c_stops_every_worker_and_run_json_says_which_hosts_were_done(slow_lab, hosts, tmp_path, workers):
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO / "cli")}
    # mlxfwmanager answers in 4 s on the realistic lab: when the first host is done, the next ones are surely
    # mid-command when Ctrl-C lands (with 0.3 s commands a loaded machine let every running host finish first, and
    # no host was cut short)
    proc = subprocess.Popen([sys.executable, "-m", "fabricproof", "collect", "-i", str(slow_lab.dir / "inventory.yml"),
                             "-c", "mlxfwmanager,lsmod", "--forks", "2", "--workers", str(workers), "-q", "-o",
                             str(run_dir)],
                            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while not list(run_dir.glob("facts/*.json")):  # some hosts done, most still to come
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    children = children_of(proc.pid)
    assert len(children) == (workers if workers > 1 else 0)
    proc.send_signal(signal.SIGINT)  # Ctrl-C reaches the command; it stops its workers itself
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    run = json.loads((run_dir / "run.json").read_text())
    names = {h.name for h in hosts}
    assert run["status"] == "interrupted"
    assert run["done"] and run["pending"] and set(run["done"]) | set(run["pending"]) == names
    assert not set(run["done"]) & set(run["pending"])
    # hosts running at the interrupt were cut short and recorded before run.json was: nothing on disk is pending
    assert set(run["done"]) == {p.stem for p in (run_dir / "facts").glob("*.json")} | set(run["errors"])
    said = [e["message"] for e in run["errors"].values()] + [m for e in run["collector_errors"].values() for m in e.values()]
    assert any("the collection was interrupted" in m for m in said), said
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]  # no worker outlived the command


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found
