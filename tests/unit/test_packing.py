"""The evaluation's memory seam (judging.packing) on its own: what it keeps reads back unchanged, and repeats are one
object. tests/checks/test_projection.py holds a streaming evaluation to it end to end."""

from __future__ import annotations

import errno
import tempfile

import pytest

from fabricproof.judging import packing
from fabricproof.judging.packing import Records, Tuples, shared
from fabricproof.model import Outcome, Result, Severity

def test_repeated_strings_and_evidence_tuples_are_one_object():
    a, b = "".join(["baseline sets no ", "rdma.peermem"]), "".join(["baseline sets ", "no rdma.peermem"])
    assert a is not b and shared(a) is shared(b)
    assert shared("") == ""
    tuples = Tuples()
    first = tuples.of("".join(["raw/h1/", "lsmod.txt"]))
    assert tuples.of("raw/h1/lsmod.txt") is first == ("raw/h1/lsmod.txt",)


def test_records_past_a_chunk_go_to_the_scratch_file_and_read_back_in_the_order_added(monkeypatch):
    monkeypatch.setattr(packing, "CHUNK", 2)
    records = Records(2)
    items = [("h%d" % n, None, (f"0x{n:04x}",), ("the fleet",), (f"raw/h{n}/ibstat.txt",)) for n in range(5)]
    for item in items:
        records.add(1, item)
    assert records.written > 0  # two chunks spilled, one item held
    assert [list(chunk) for chunk in records.segment(1)] == [items[0:2], items[2:4], items[4:]]
    assert list(records.segment(0)) == [[]]


def test_a_scratch_file_the_disk_refuses_names_the_directory_it_was_made_in(tmp_path, monkeypatch):
    from diskkit import small_tmpfs

    from fabricproof.errors import WriteError

    with small_tmpfs(tmp_path / "disk", "4k") as disk:
        (disk / "filler").write_bytes(b"\0" * 4096)  # the one page the disk has
        monkeypatch.setattr(tempfile, "tempdir", str(disk))
        spill = packing.Spill(1)
        with pytest.raises(WriteError) as caught:
            for n in range(packing.CHUNK):
                spill.add(0, Result("c", "t", f"h{n}", Outcome.PASS, Severity.CRITICAL, "e"))
    assert caught.value.path == str(disk) and caught.value.errno == errno.ENOSPC
    assert str(caught.value).startswith(f"cannot write {disk}: No space left on device (the evaluation's")


def test_a_result_made_from_its_fields_is_the_result_its_constructor_makes():
    """made_result skips the frozen dataclass's __init__: every field lands in its own slot, and the object stays
    frozen."""
    import dataclasses

    from fabricproof.model import Finding

    fields = {f.name: f"v-{f.name}" for f in dataclasses.fields(Result)}
    fields.update(outcome=Outcome.FAIL, severity=Severity.CRITICAL, evidence=("raw/h/x.txt",),
                  findings=(Finding("/p", 1, "GPU 1", "t"),), references=("r",))
    made = packing.made_result(*fields.values())
    assert made == Result(**fields) and type(made) is Result
    assert {name: getattr(made, name) for name in fields} == fields
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.host = "other"  # type: ignore[misc]


def test_a_segment_added_out_of_host_order_reads_back_in_host_order_a_window_at_a_time(monkeypatch):
    """in_order picks each window of hosts from the chunks that hold it (issue 23.2): never a whole check's results
    at once, however large the fleet."""
    monkeypatch.setattr(packing, "CHUNK", 3)
    monkeypatch.setattr(packing, "WINDOW", 4)
    spill = packing.Spill(1)
    hosts = [f"h{n:02d}" for n in range(11)]
    arrival = hosts[1::2] + hosts[0::2]
    for host in arrival + ["zz-unreached"]:  # a host not collected comes after the hosts, as finish() adds it
        spill.add(0, Result("c", "t", host, Outcome.PASS, Severity.CRITICAL, "e"))
    order = [arrival.index(h) for h in hosts]
    windows = list(packing.in_order(spill, 0, order))
    assert [r.host for window in windows for r in window] == hosts + ["zz-unreached"]
    assert max(map(len, windows)) == 4


def test_a_reports_results_read_as_their_fields_are_its_results_in_the_same_order(monkeypatch):
    """Spilled.fields() (what the JSON report reads, issue 23.1) gives each result's fields in the order iterating
    the results gives them: segments in report order, hosts put in host order across windows, chunks spilled and
    the results still held, and a segment added in order."""
    monkeypatch.setattr(packing, "CHUNK", 3)
    monkeypatch.setattr(packing, "WINDOW", 4)
    spill = packing.Spill(2)
    hosts = [f"h{n:02d}" for n in range(11)]
    arrival = hosts[1::2] + hosts[0::2]
    for k, outcome in ((0, Outcome.PASS), (1, Outcome.FAIL)):
        for n, host in enumerate(arrival if k == 0 else hosts):
            spill.add(k, Result(f"c{k}", "t", host, outcome, Severity.CRITICAL, "e", actual=n, evidence=(f"raw/{host}",),
                                action="reboot" if k else ""))
    order = [arrival.index(h) for h in hosts]
    results = packing.Spilled(spill, [(1, ()), (0, order)], spill.tally([1, 0], lambda k: Severity.CRITICAL))
    assert list(results.fields()) == [packing.result_fields(r) for r in results]
    assert [f[2] for f in results.fields()] == hosts + hosts
    assert [f[0] for f in results.fields()] == ["c1"] * 11 + ["c0"] * 11


def test_reading_a_check_added_out_of_host_order_holds_a_window_not_the_check(monkeypatch):
    """The reporters' read path (Spilled, in_order) at 1,000 and 4,000 hosts added in two shards: what it holds at
    once stays flat (it held every result of a check, ~270 bytes a host, to put them in host order)."""
    import tracemalloc

    monkeypatch.setattr(packing, "WINDOW", 2 * packing.CHUNK, raising=False)  # both fleets span several windows

    def peak(n: int) -> int:
        spill = packing.Spill(1)
        names = [f"h{i:05d}" for i in range(n)]
        arrival = names[1::2] + names[0::2]
        for host in arrival:
            spill.add(0, Result("c", "t", host, Outcome.SKIP, Severity.CRITICAL, "e", reason="not applicable"))
        place = {h: p for p, h in enumerate(arrival)}
        order = [place[h] for h in names]
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            assert sum(1 for chunk in packing.in_order(spill, 0, order) for _ in chunk) == n
            return tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()

    small, large = peak(1000), peak(4000)
    assert (large - small) / 3000 < 50, (small, large)
