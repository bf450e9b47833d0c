"""The evaluation's memory seam (judging.packing) on its own: what it keeps reads back unchanged, and repeats are one
object. tests/checks/test_projection.py holds a streaming evaluation to it end to end."""

from __future__ import annotations

import errno
import json
import tempfile

import pytest

from fabricproof.judging import packing
from fabricproof.judging.packing import PackedFacts, Tuples, projections, shared
from fabricproof.model import Outcome, Result, Severity

DOC = {"host": "h1", "collectors": {"lsmod": {"status": "ok", "evidence": "raw/h1/lsmod.txt"}},
       "ib": {"ports": [{"rate": 400, "state": "Active", "guid": f"0x{n:016x}"} for n in range(64)]}}


def test_packed_projections_read_back_as_the_json_they_were_and_take_less_room():
    packed = projections(pack=True)
    assert isinstance(packed, PackedFacts)
    packed["h1"] = DOC
    assert packed["h1"] == DOC and packed["h1"] is not DOC
    assert list(packed) == ["h1"] and len(packed) == 1
    assert len(packed._blobs["h1"]) < len(json.dumps(DOC)) / 3


def test_unpacked_projections_are_the_callers_own_documents():
    held = projections(pack=False)
    held["h1"] = DOC
    assert type(held) is dict and held["h1"] is DOC


def test_repeated_strings_and_evidence_tuples_are_one_object():
    a, b = "".join(["baseline sets no ", "rdma.peermem"]), "".join(["baseline sets ", "no rdma.peermem"])
    assert a is not b and shared(a) is shared(b)
    assert shared("") == ""
    tuples = Tuples()
    first = tuples.of("".join(["raw/h1/", "lsmod.txt"]))
    assert tuples.of("raw/h1/lsmod.txt") is first == ("raw/h1/lsmod.txt",)


def test_projections_past_the_held_hosts_go_to_a_scratch_file_and_read_back_the_same(monkeypatch):
    monkeypatch.setattr(packing, "HELD_HOSTS", 2)
    packed = projections(pack=True)
    docs = {f"h{n}": {**DOC, "host": f"h{n}"} for n in range(5)}
    for host, doc in docs.items():
        packed[host] = doc
    assert sum(isinstance(b, bytes) for b in packed._blobs.values()) == 2  # the rest are places in the file
    assert packed._scratch.written > 0
    assert {host: packed[host] for host in packed} == docs and len(packed) == 5


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
