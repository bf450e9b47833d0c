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
