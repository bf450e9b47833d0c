"""Sharding a fleet over worker processes (pure), and what a dead worker leaves behind in the run store."""

from __future__ import annotations

import json
import subprocess
import sys

from fabricproof.collect import shards
from fabricproof.collect.record import Finished
from fabricproof.model import Host
from fabricproof.runstore import RunStore
from fabricproof.transport import RunContext


def test_worker_count_defaults_to_the_cores_for_big_fleets_and_never_exceeds_hosts_or_forks():
    assert shards.worker_count(None, 20, 64, True) == 1  # small: not worth a process start
    assert shards.worker_count(None, 10_000, 64, True) == min(shards.machine_cores(), shards.MAX_DEFAULT_WORKERS)
    assert shards.worker_count(8, 3, 64, True) == 3 and shards.worker_count(8, 100, 4, True) == 4
    assert shards.worker_count(8, 100, 64, False) == 1  # Ansible fans out by itself
    assert shards.forks_each(64, 3) == [22, 21, 21] and sum(shards.forks_each(5, 2)) == 5
    assert shards.split(list("abcde"), 2) == [["a", "c", "e"], ["b", "d"]]


def test_a_dead_workers_hosts_are_collected_when_their_facts_made_it_and_not_collected_otherwise(tmp_path):
    store = RunStore.create(tmp_path / "run")
    store.begin()
    store.write_facts("h1", {"host": "h1", "collectors": {"lsmod": {"status": "error", "error": "exit 1"}}})
    dead = subprocess.Popen(["sleep", "30"])
    dead.kill()
    dead.wait()
    shard = shards.Shard(0, (Host("h1"), Host("h2"), Host("h3")), (), (), "ssh", None,
                         RunContext(store.root, "r", 1, 10))
    got: list[Finished] = []
    w = shards._Worker(shard, dead, conn=None)  # type: ignore[arg-type]
    shards._bury(w, got.append, lambda name: name == "h3", f"the worker process (pid {dead.pid}) {shards._died(dead)}")
    assert [f.host for f in got] == ["h1", "h2"]  # h3 was reported before it died
    assert got[0].doc is not None and got[0].failed == {"lsmod": "exit 1"}
    assert got[1].host_error.message == f"h2: not collected: the worker process (pid {dead.pid}) was killed by SIGKILL"
    assert json.loads(store.facts_path("h1").read_text())["host"] == "h1"


def test_a_workers_host_crosses_the_pipe_as_its_facts_files_bytes(tmp_path):
    # The worker pickles each host to the parent: the bytes the run store wrote travel, not a pickled dict (msgspec
    # reads them back in about half what pickle's two ends took), and the parent gets what the facts file holds.
    import pickle

    store = RunStore.create(tmp_path / "run")
    store.begin()
    doc = {"host": "h1", "collectors": {"lsmod": {"status": "ok", "exit_code": 0}}, "gpu": {"gpus": [{"index": 0}]}}
    written = store.write_facts("h1", doc)
    assert written == store.facts_path("h1").read_bytes()
    sent = pickle.dumps(Finished("h1", doc=doc, failed={"x": "y"}, worker=7, written=written))
    assert written in sent
    got = pickle.loads(sent)
    assert got == Finished("h1", doc=doc, failed={"x": "y"}, worker=7) and got.doc == doc
    assert pickle.loads(pickle.dumps(Finished("h1", doc=doc))).doc == doc  # not written yet: encoded on the way
    lost = Finished("h2", error=("failed", "h2: gone", False))
    assert pickle.loads(pickle.dumps(lost)) == lost


def test_ctrl_c_while_a_record_is_taken_lands_after_the_run_has_it():
    # CI caught this: Ctrl-C sent as the first facts file appeared landed inside the parent's accept, and run.json
    # called a host pending whose facts were on disk. The signal is sent from inside accept, the worst moment.
    import os
    import signal
    from multiprocessing import Pipe

    import pytest

    ours, theirs = Pipe(duplex=False)
    theirs.send(Finished("h1", doc={"host": "h1"}))
    theirs.close()
    w = shards._Worker(shards.Shard(0, (Host("h1"),), (), (), "ssh", None, RunContext("/nonexistent", "r", 1, 10)),
                       subprocess.Popen(["true"]), ours)
    accepted: list[str] = []

    def accept(f: Finished) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # bytecode boundaries, where Python runs the handler
            pass
        accepted.append(f.host)

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), shards._Held() as held:
        shards._drain([w], held, accept, deadline=None)
    assert accepted == ["h1"]
    assert signal.getsignal(signal.SIGINT) is before  # the run's own handler is put back
    w.process.wait()
    ours.close()


# A worker process as shards._start runs it: its threads allocate, then glibc's malloc_info lists the arenas.
_ARENAS_SCRIPT = """
import ctypes, io, os, pickle, sys, threading
from fabricproof.collect import worker

def threads_allocate(conn, shard):
    start = threading.Barrier(32)
    held = []
    def one():
        start.wait()
        held.append(bytearray(300_000))  # a host's outputs, as a replay or SSH thread holds them
    threads = [threading.Thread(target=one) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    out = libc.fopen(sys.argv[1].encode(), b"w")
    libc.malloc_info(0, out)
    libc.fclose(out)

worker.worker_main = threads_allocate
sys.stdin = io.TextIOWrapper(io.BytesIO(pickle.dumps(None)))
worker.main([str(os.pipe()[1])])
"""


def test_a_workers_threads_share_a_few_malloc_arenas_so_its_memory_does_not_grow_with_its_hosts(tmp_path):
    # One arena per thread (glibc's default, up to 8 a core) let a replay worker's RSS grow with the hosts it took:
    # 57 -> 70 MB from 500 to 5,000 hosts, 45 -> 53 MB with two arenas (bench_fleet.py's replay, issue 23.2).
    from fabricproof.collect import worker

    info = tmp_path / "malloc-info.xml"
    subprocess.run([sys.executable, "-c", _ARENAS_SCRIPT, str(info)], check=True, timeout=120)
    heaps = info.read_text().count("<heap nr=")
    assert 1 <= heaps <= worker.MALLOC_ARENAS
