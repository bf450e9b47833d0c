"""The run store owns the run directory: its layout, a manifest valid against run.schema.json, owner-only evidence,
and readers that refuse a broken manifest with the file and the JSON path."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from fabricproof import documents
from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.errors import InputError
from fabricproof.model import CommandResult, Host
from fabricproof.runstore import RunStore, facts_dir_of, manifest_document
from fabricproof.transport.replay import ReplayOptions

LSMOD = "Module                  Size  Used by\nnvidia_peermem         16384  0\n"
PICK = [COLLECTORS["lsmod"], COLLECTORS["cmdline"]]


def hand_made(tmp_path: Path) -> Path:
    """Evidence as a person would lay it out by hand: outputs only, no meta.json, no run.json."""
    src = tmp_path / "hand"
    (src / "raw" / "h1").mkdir(parents=True)
    (src / "raw" / "h1" / "lsmod.txt").write_text(LSMOD)
    return src


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_collection_writes_a_manifest_valid_against_the_run_schema(tmp_path):
    result = collect([Host("h1"), Host("ghost")], tmp_path / "run", via="replay",
                     options=ReplayOptions(hand_made(tmp_path)), collectors=PICK, inventory="inv.yml", limit="h*")
    doc = json.loads((result.run_dir / "run.json").read_text())
    Draft202012Validator(documents.schema("run")).validate(doc)
    assert doc["status"] == "complete" and doc["via"] == "replay" and doc["hosts"] == ["h1", "ghost"]
    assert (doc["inventory"], doc["limit"], doc["forks"]) == ("inv.yml", "h*", 64)
    assert doc["errors"]["ghost"]["kind"] == "failed" and doc["counts"]["not_collected"] == 1
    assert [c["id"] for c in doc["collectors"]] == ["lsmod", "cmdline"]
    assert RunStore.open(result.run_dir).manifest() == doc  # read back through the schema


def test_every_file_and_directory_of_a_run_is_the_owners_only(tmp_path):
    result = collect([Host("h1")], tmp_path / "run", via="replay", options=ReplayOptions(hand_made(tmp_path)),
                     collectors=PICK)
    paths = [result.run_dir, *result.run_dir.rglob("*")]
    assert {p.relative_to(result.run_dir).as_posix() for p in paths if p.is_file()} >= {
        "run.json", "facts/h1.json", "raw/h1/lsmod.txt", "raw/h1/cmdline.txt", "raw/h1/meta.json"}
    loose = {p.relative_to(tmp_path).as_posix(): oct(mode(p)) for p in paths
             if mode(p) != (0o700 if p.is_dir() else 0o600)}
    assert loose == {}


def test_a_broken_manifest_is_refused_with_the_file_and_the_json_path(tmp_path):
    store = RunStore(tmp_path)
    good = manifest_document(run_id="r", status="complete", via="ssh", tool_version="0", started_at="", finished_at="",
                             duration_s=0, hosts=["h1"], commands=[], collected=1, errors={}, command_errors={},
                             settings={})
    store.write_manifest({**good, "status": "finished-ish"})
    with pytest.raises(InputError) as err:
        store.manifest()
    problem = err.value.problems[0]
    assert problem.file == str(tmp_path / "run.json") and problem.pointer == "/status" and problem.line


def test_a_run_directory_is_refused_once_it_holds_a_run(tmp_path):
    root = RunStore.create(tmp_path / "r").root
    RunStore.create(root)  # made, nothing in it yet: fine
    (root / "raw" / ".h1.partial").mkdir(parents=True)  # crash debris is no run
    RunStore.create(root)
    for made in ("facts", "raw/h1", "run.json"):
        other = RunStore.create(tmp_path / made.replace("/", "-")).root
        target = other / made
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir() if "." not in made else target.write_text("{}")
        with pytest.raises(InputError, match="already holds a collection run"):
            RunStore.create(other)


def test_hand_made_evidence_reads_as_exit_0_and_a_missing_command_as_nothing(tmp_path):
    store = RunStore.open(hand_made(tmp_path))
    assert store.manifest() is None and store.recorded_errors() == {} and store.hosts() == ["h1"]
    rec = store.read("h1", "lsmod", store.meta("h1"))
    assert rec is not None and (rec.stdout, rec.exit_code, rec.error) == (LSMOD, 0, None)
    assert store.read("h1", "cmdline", store.meta("h1")) is None


def test_evidence_is_renamed_into_place_whole(tmp_path):
    store = RunStore.create(tmp_path / "r")
    store.begin()
    refs = store.write_evidence("h1", {"lsmod": CommandResult(("lsmod",), LSMOD, "warn\n", exit_code=0)})
    assert refs == {"lsmod": "raw/h1/lsmod.txt"}
    assert sorted(p.name for p in (store.root / "raw").iterdir()) == ["h1"]  # no staging left
    meta = store.meta("h1")
    assert meta["lsmod"]["argv"] == ["lsmod"] and meta["lsmod"]["stderr_bytes"] == 5
    with pytest.raises(FileExistsError):  # evidence is never overwritten
        store.write_evidence("h1", {"lsmod": CommandResult(("lsmod",), "other")})


def test_spilled_outputs_are_renamed_into_the_evidence_not_copied_and_parsed_from_there(tmp_path):
    from fabricproof import facts as facts_mod
    from fabricproof.spool import Spooler

    store = RunStore.create(tmp_path / "r")
    store.begin()
    spooler = Spooler(store.spool_dir, memory_bytes=8)
    out, err = spooler.spool(), spooler.spool()
    out.write(LSMOD.encode())
    err.write(b"lsmod: a warning longer than the bound\n")
    (_, out_path), (_, err_path) = out.finish(), err.finish()
    inodes = (Path(out_path).stat().st_ino, Path(err_path).stat().st_ino)
    spilled = CommandResult(("lsmod",), "", "", exit_code=0, stdout_path=out_path, stderr_path=err_path)
    store.write_evidence("h1", {"lsmod": spilled})
    raw = store.raw_dir("h1")
    assert ((raw / "lsmod.txt").stat().st_ino, (raw / "lsmod.stderr").stat().st_ino) == inodes
    assert sorted(p.name for p in (store.root / "raw").iterdir()) == ["h1"]  # no spill file left behind
    assert (store.meta("h1")["lsmod"]["stdout_bytes"], store.meta("h1")["lsmod"]["stderr_bytes"]) == (len(LSMOD), 39)
    placed = store.placed("h1", "lsmod", spilled)
    assert placed.stdout_path == str(raw / "lsmod.txt") and placed.stderr_path == str(raw / "lsmod.stderr")
    doc = facts_mod.build("h1", {"lsmod": placed}, via="ssh")
    assert doc["collectors"]["lsmod"]["status"] == "ok" and doc["kernel"]["modules"]["loaded"]
    failed = CommandResult(("lsmod",), "", "", exit_code=1, stderr_path=str(raw / "lsmod.stderr"))
    assert facts_mod.build("h1", {"lsmod": failed}, via="ssh")["collectors"]["lsmod"]["error"] == \
        "exit 1: lsmod: a warning longer than the bound"


def test_an_output_too_large_to_parse_is_kept_as_evidence_and_not_read(tmp_path):
    from fabricproof import facts as facts_mod
    from fabricproof.spool import PARSE_BYTES

    flood = tmp_path / "ibstat.txt"
    with open(flood, "wb") as fh:  # sparse: its size is what counts
        fh.truncate(PARSE_BYTES + 1)
    doc = facts_mod.build("h1", {"ibstat": CommandResult(("ibstat",), "", stdout_path=str(flood))}, via="ssh")
    assert doc["collectors"]["ibstat"]["error"] == \
        "the output (8,388,609 bytes) is larger than fabricproof parses (8 MiB): kept as evidence, not read"


def test_facts_are_found_in_a_run_directory_or_a_plain_one(tmp_path):
    (tmp_path / "run" / "facts").mkdir(parents=True)
    assert facts_dir_of(tmp_path / "run") == tmp_path / "run" / "facts"
    assert facts_dir_of(tmp_path / "plain") == tmp_path / "plain"


def test_evidence_holds_exactly_the_bytes_the_host_sent_and_a_replay_keeps_them(tmp_path):
    """Invalid UTF-8 is evidence too: the raw file holds the host's bytes, not U+FFFD; text is only for parsing,
    and a run replayed from that evidence writes the same bytes again."""
    sent = b"\xff\xfeModule  Size  Used by\n\x80\n"
    text = sent.decode("utf-8", errors="replace")
    store = RunStore.create(tmp_path / "r")
    store.begin()
    store.write_evidence("h1", {"lsmod": CommandResult(("lsmod",), text, "\ufffd", exit_code=0, stdout_bytes=sent,
                                                       stderr_bytes=b"\xfe")})
    assert (store.raw_dir("h1") / "lsmod.txt").read_bytes() == sent
    assert (store.raw_dir("h1") / "lsmod.stderr").read_bytes() == b"\xfe"
    assert store.meta("h1")["lsmod"]["stdout_bytes"] == len(sent)
    rec = store.read("h1", "lsmod", store.meta("h1"))
    assert rec is not None and rec.stdout == text  # decoded only to parse
    replayed = collect([Host("h1")], tmp_path / "again", via="replay", options=ReplayOptions(store.root),
                       collectors=[COLLECTORS["lsmod"]])
    assert (replayed.run_dir / "raw" / "h1" / "lsmod.txt").read_bytes() == sent


def test_every_host_name_gets_a_file_name_that_fits_and_stays_inside_the_run():
    """Plain names are kept; a 253-character FQDN, `zz/bad`, `.hidden` or `..` get a readable cut and a hash: the
    hidden staging name and the facts' temporary name still fit NAME_MAX, and two hosts never share a name."""
    from fabricproof.runstore import file_name

    fqdn = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    assert len(fqdn) == 253
    names = ["h100-0001", "10.0.0.7", "fe80::1", fqdn, fqdn[:-1] + "e", "zz/bad", "zz_bad", ".hidden", "..", "-x",
             "h\u00e9", "a~b"]
    made = {n: file_name(n) for n in names}
    assert [n for n in names if made[n] == n] == ["h100-0001", "10.0.0.7", "fe80::1", "zz_bad"]
    assert len(set(made.values())) == len(names)
    for name in made.values():
        assert "/" not in name and not name.startswith((".", "-")) and name not in ("", "..")
        assert len(f".{name}.json.tmp".encode()) <= 255 and len(f".{name}.partial".encode()) <= 255
