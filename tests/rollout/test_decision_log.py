"""The decision log is a log: each record whole or not at all (a real full tmpfs), a torn last line set aside in a
named file before the next record, unreadable lines listed by number, and `rollout status` never crashing on any
byte in the file (a bounded fuzz)."""

from __future__ import annotations

import errno
import json
import random

import pytest
from fabricproof.fsutil import NotWritten
from fabricproof.rollout import state as st
from fabricproof.rollout.decisions import (DECISIONS_FILE, DecisionLog, format_line, format_unreadable,
                                           parse_line, read_log)
from fabricproof.rollout.plan import Budget, Wave
from typer.testing import CliRunner

from .conftest import fill
from .entry import app

#: A record as the writer makes it, for building logs by hand.
GOOD = (b'{"when": "2026-12-02T05:00:00Z", "run_id": "r", "who": "x@y", "what": "PROCEED", "why": "proven", '
        b'"step": "w0.decide", "wave": "pilot", "hosts": ["h1"], "evidence": []}')


def whats(run_dir) -> list[str]:
    return [d["what"] for d in read_log(run_dir).records]


def test_a_record_is_written_whole_or_not_at_all_on_a_full_disk(small_disk):
    run_dir = small_disk / "run"
    run_dir.mkdir()
    log = DecisionLog(run_dir, "r", actor="x@y")
    log.record("START", "go")
    fill(small_disk)
    path = run_dir / DECISIONS_FILE
    before = path.read_bytes()
    # The log's last page still has room for about 3.9 KB: the disk cuts a longer record short (a short write).
    for _ in range(2):
        with pytest.raises(NotWritten) as exc:
            log.record("PROCEED", "proven " + "y" * 8000)
        assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(path)
        assert exc.value.strerror.startswith("decision PROCEED not recorded: only ")
        assert path.read_bytes() == before  # cut back: no half line for the next record to land on
    log.record("HALT", "a short record still fits")  # whole or not at all, not "nothing once the disk is full"
    assert whats(run_dir) == ["START", "HALT"] and not read_log(run_dir).unreadable
    # A log with no page of its own gets no byte at all (the write itself fails).
    other = small_disk / "other"
    other.mkdir()
    with pytest.raises(NotWritten, match="No space left on device; nothing of it was kept") as exc:
        DecisionLog(other, "o", actor="x@y").record("START", "go")
    assert exc.value.filename == str(other / DECISIONS_FILE) and (other / DECISIONS_FILE).read_bytes() == b""


def test_a_torn_last_line_is_set_aside_in_a_named_file_before_the_next_record(tmp_path):
    DecisionLog(tmp_path, "r", actor="x@y").record("START", "go")
    path = tmp_path / DECISIONS_FILE
    fragment = b'{"when": "2026-12-02T05:00:00Z", "run_id": "r", "who": "x@y", "what": "HA'
    with path.open("ab") as fh:
        fh.write(fragment)  # the writer died mid-line
    assert [(u.line, u.reason.split(":")[0]) for u in read_log(tmp_path).unreadable] == [(2, "torn, no newline at the end")]

    log = DecisionLog(tmp_path, "r", actor="x@y")
    log.record("RESUME", "resumed")
    assert (tmp_path / "decisions.jsonl.torn-1").read_bytes() == fragment  # kept as it was
    got = read_log(tmp_path)
    assert [d["what"] for d in got.records] == ["START", "TORN_TAIL", "RESUME"]  # RESUME on a line of its own
    assert got.unreadable == [] and got.set_aside == ["decisions.jsonl.torn-1"]
    torn = got.records[1]
    assert torn["why"].startswith(f"line 2 of decisions.jsonl ({len(fragment)} bytes) was not a whole record")
    assert torn["evidence"] == ["decisions.jsonl.torn-1"]
    assert log.set_aside == [{"line": 2, "bytes": len(fragment), "file": "decisions.jsonl.torn-1",
                              "reason": "cut short, no newline: not JSON (Unterminated string starting at, column 71)"}]

    # A complete last line that is no record is set aside too, under the next free name.
    with path.open("ab") as fh:
        fh.write(b"\xff not a record\n")
    log.record("HALT", "stop")
    assert (tmp_path / "decisions.jsonl.torn-2").read_bytes() == b"\xff not a record\n"
    assert whats(tmp_path) == ["START", "TORN_TAIL", "RESUME", "TORN_TAIL", "HALT"]
    assert read_log(tmp_path).set_aside == ["decisions.jsonl.torn-1", "decisions.jsonl.torn-2"]


def test_a_whole_record_missing_only_its_newline_is_completed_not_set_aside(tmp_path):
    (tmp_path / DECISIONS_FILE).write_bytes(GOOD)
    DecisionLog(tmp_path, "r", actor="x@y").record("HALT", "stop")
    assert whats(tmp_path) == ["PROCEED", "HALT"] and not list(tmp_path.glob("*.torn-*"))


def test_unreadable_lines_are_listed_with_their_numbers_and_never_fatal(tmp_path):
    lines = [GOOD, b"\xff\xfe", b"not json", b"[1, 2]", b'{"what": "X"}', b"",
             GOOD.replace(b'["h1"]', b"5"), b"[" * 100_000, b'{"a": NaN}', b"9" * 5000, GOOD]
    (tmp_path / DECISIONS_FILE).write_bytes(b"\n".join(lines) + b"\n" + b'{"when": "20')
    got = read_log(tmp_path)
    assert len(got.records) == 2
    assert [(u.line, u.reason) for u in got.unreadable] == [
        (2, "not UTF-8 (byte 0xff at column 1)"),
        (3, "not JSON (Expecting value, column 1)"),
        (4, "not a decision record (a JSON list, not an object)"),
        (5, "not a decision record ('when' missing or not text)"),
        (6, "empty line"),
        (7, "not a decision record ('hosts' is not a list of text)"),
        (8, got.unreadable[6].reason),
        (9, "not JSON (ValueError: NaN is not a JSON number)"),
        (10, got.unreadable[8].reason),
        (12, "torn, no newline at the end: not JSON (Unterminated string starting at, column 10); set aside when "
             "the next record is appended"),
    ]
    assert got.unreadable[6].reason.startswith("not JSON (RecursionError: maximum recursion depth exceeded")
    assert got.unreadable[8].reason.startswith("not JSON (ValueError: Exceeds the limit")
    assert got.unreadable[0].text == "\\xff\\xfe" and got.unreadable[6].text.endswith("…")
    assert isinstance(parse_line(GOOD), dict)


# --------------------------------------------------------------------------------------------- status


def _run(tmp_path):
    waves = [Wave(0, "pilot", (("h1",),), (("h1",),), False, Budget(), None)]
    state = st.RunState.create(tmp_path / "runs" / "run-1", run_id="run-1", plan_name="p", plan_file="/x/plan.yml",
                               inventory="/x/inv.yml", waves=waves, who="me@here", settings={"via": "ssh"})
    state.set_status(st.HALTED)
    state.save()
    return tmp_path / "runs", state.dir


def status(runs_dir, *args):
    return CliRunner().invoke(app(), ["rollout", "status", "run-1", "--runs-dir", str(runs_dir), *args],
                              catch_exceptions=False)


def test_status_lists_unreadable_lines_and_set_aside_tails(tmp_path):
    runs_dir, run_dir = _run(tmp_path)
    (run_dir / DECISIONS_FILE).write_bytes(GOOD + b"\n\xff\xfe oops\n" + GOOD + b"\n" + b'{"when": "20')
    table = status(runs_dir)
    assert table.exit_code == 0, table.output
    assert f"2 unreadable line(s) in {run_dir / DECISIONS_FILE} (kept there, not decisions):" in table.output
    assert "line 2: not UTF-8 (byte 0xff at column 1): '\\\\xff\\\\xfe oops'" in table.output
    assert "line 4: torn, no newline at the end" in table.output
    doc = json.loads(status(runs_dir, "-f", "json").stdout)
    assert [d["what"] for d in doc["decisions"]] == ["PROCEED", "PROCEED"]
    assert [(u["line"], u["reason"].split(" (")[0]) for u in doc["decision_log"]["unreadable"]] == [
        (2, "not UTF-8"), (4, "torn, no newline at the end: not JSON")]
    assert doc["decision_log"]["path"] == str(run_dir / DECISIONS_FILE) and doc["decision_log"]["set_aside"] == []
    page = status(runs_dir, "-f", "html").stdout
    assert '<li data-line="2">line 2: not UTF-8 (byte 0xff at column 1): <code>\\xff\\xfe oops</code></li>' in page

    DecisionLog(run_dir, "run-1", actor="x@y").record("RESUME", "again")
    doc = json.loads(status(runs_dir, "-f", "json").stdout)
    assert [u["line"] for u in doc["decision_log"]["unreadable"]] == [2]  # the torn tail left the log ...
    assert doc["decision_log"]["set_aside"] == ["decisions.jsonl.torn-1"]  # ... for a file beside it
    assert "torn last line(s) set aside beside decisions.jsonl, kept as they were: decisions.jsonl.torn-1" in \
        status(runs_dir).output


#: Pieces the fuzz strings are made of besides random bytes: what a log may really hold after a crash, a full disk
#: or a careless editor.
PIECES = [GOOD, b"\n", b"\xff", b"\xc3", b"\x00", b"\x1b[31m", b"\r", b"{}", b"[", b"]" , b'"', b"\\ud800", b"NaN",
          b'{"when": 1, "who": "a", "what": "b", "why": "c"}', b'"hosts": ["a", 2]', b"\xf0\x9f\x92", b" " * 3]


def _fuzz_cases(n: int) -> list[bytes]:
    rng = random.Random(20261202)
    cases = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 12)):
            parts.append(rng.choice(PIECES) if rng.random() < 0.6 else rng.randbytes(rng.randint(1, 40)))
        cases.append(b"".join(parts))
    return cases


def _accounted(data: bytes, records: int, unreadable: list[int]) -> None:
    """Every line of the file is either a record or listed as unreadable with its number."""
    lines = data.split(b"\n")
    total = len(lines) - (lines[-1] == b"")
    assert records + len(unreadable) == total and all(1 <= n <= total for n in unreadable), data


def test_the_reader_takes_any_bytes(tmp_path):
    for data in _fuzz_cases(1000):
        (tmp_path / DECISIONS_FILE).write_bytes(data)
        got = read_log(tmp_path)
        _accounted(data, len(got.records), [u.line for u in got.unreadable])
        for d in got.records:
            format_line(d)
        for u in got.unreadable:
            format_unreadable(u)


def test_status_survives_any_bytes_in_the_log(tmp_path):
    runs_dir, run_dir = _run(tmp_path)
    for data in _fuzz_cases(30):  # the command's every format on a few (it takes ~0.1 s a call); the reader on many
        (run_dir / DECISIONS_FILE).write_bytes(data)
        for fmt in ("table", "html"):
            result = status(runs_dir, "-f", fmt)
            assert result.exit_code == 0, (data, fmt, result.output)
        result = status(runs_dir, "-f", "json")
        assert result.exit_code == 0, (data, result.output)
        doc = json.loads(result.stdout)
        _accounted(data, len(doc["decisions"]), [u["line"] for u in doc["decision_log"]["unreadable"]])
