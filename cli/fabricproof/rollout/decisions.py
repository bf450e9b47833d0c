"""The decision log: runs/<run id>/decisions.jsonl, one JSON object a line, each appended whole or not at all."""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fsutil import NotWritten, append_whole, open_append, write_new
from ..timeutil import utc_now
from .stepid import StepId
from .store import DECISIONS_FILE, RolloutStore

TORN_TAIL = "TORN_TAIL"

# The verdicts an operator reads first; every other record is a step (what was done, on what evidence).
PROCEED, ROLLBACK, HALT = "PROCEED", "ROLLBACK", "HALT"

_TEXT_FIELDS = ("when", "who", "what", "why")
_PREVIEW = 80  # characters of an unreadable line shown to the operator; the line itself stays in the file


def who() -> str:
    """user@host of whoever runs fabricproof; a sudo caller is named too (the person, not just root)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    sudo = os.environ.get("SUDO_USER")
    if sudo and sudo != user:
        user = f"{user}(sudo:{sudo})"
    return f"{user}@{socket.gethostname()}"


def path_of(run_dir: Path) -> Path:
    """The decision log of a run directory."""
    return RolloutStore(run_dir).decisions_path


def set_aside_files(run_dir: Path) -> list[Path]:
    """Torn tails set aside beside the log, oldest first."""
    return [p for _n, p in sorted(RolloutStore(run_dir).torn_files())]


def files(run_dir: Path) -> list[Path]:
    """The log and every torn tail set aside from it: what an evidence bundle keeps of a run's decisions."""
    return [p for p in (path_of(run_dir), *set_aside_files(run_dir)) if p.is_file()]


# ------------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Unreadable:
    """A line of the log that holds no decision record: its number (from 1), why, and how it starts."""

    line: int
    reason: str
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "reason": self.reason, "text": self.text}


@dataclass(frozen=True)
class Log:
    """What a decision log holds: its records in order, the lines that are not records, and the torn tails set
    aside beside it (file names)."""

    records: list[dict[str, Any]]
    unreadable: list[Unreadable]
    set_aside: list[str]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_line(raw: bytes) -> dict[str, Any] | str:
    """One line (without its newline) as a decision record, or the reason it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
    if not text.strip():
        return "empty line"
    try:
        rec = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg}, column {exc.colno})"
    except (ValueError, RecursionError) as exc:  # NaN, a 5,000-digit number, [[[[... nested past the parser's depth
        return f"not JSON ({type(exc).__name__}: {str(exc)[:60]})"
    if not isinstance(rec, dict):
        return f"not a decision record (a JSON {type(rec).__name__}, not an object)"
    for key in _TEXT_FIELDS:
        if not isinstance(rec.get(key), str):
            return f"not a decision record ({key!r} missing or not text)"
    for key in ("hosts", "evidence"):
        value = rec.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"not a decision record ({key!r} is not a list of text)"
    for key in ("wave", "step"):
        if not isinstance(rec.get(key, ""), str | None):
            return f"not a decision record ({key!r} is not text)"
    return rec


def _preview(raw: bytes) -> str:
    text = raw[: _PREVIEW * 4].decode("utf-8", errors="backslashreplace")
    return text[:_PREVIEW] + ("…" if len(text) > _PREVIEW or len(raw) > _PREVIEW * 4 else "")


def read_log(run_dir: Path) -> Log:
    """Everything a decision log holds; no byte in it is fatal: what is not a record is listed with its line number."""
    aside = [p.name for p in set_aside_files(run_dir)]
    try:
        data = path_of(run_dir).read_bytes()
    except FileNotFoundError:
        return Log([], [], aside)
    records: list[dict[str, Any]] = []
    bad: list[Unreadable] = []
    lines = data.split(b"\n")
    last = lines.pop()  # b"" when the log ends with a newline, as every whole record does
    for n, raw in enumerate(lines, 1):
        rec = parse_line(raw)
        if isinstance(rec, dict):
            records.append(rec)
        else:
            bad.append(Unreadable(n, rec, _preview(raw)))
    if last:
        rec = parse_line(last)
        if isinstance(rec, dict):  # whole but for its newline: the next append completes it
            records.append(rec)
        else:
            bad.append(Unreadable(len(lines) + 1, f"torn, no newline at the end: {rec}; set aside when the next "
                                                  "record is appended", _preview(last)))
    return Log(records, bad, aside)


def read(run_dir: Path) -> list[dict[str, Any]]:
    """Every decision of a run, in order (read_log says which lines are not decisions)."""
    return read_log(run_dir).records


def format_line(d: dict[str, Any]) -> str:
    """One decision as an operator reads it: time, who, what, on which hosts, why."""
    hosts = d.get("hosts") or []
    shown = ", ".join(hosts[:4]) + (f" (+{len(hosts) - 4})" if len(hosts) > 4 else "")
    where = f" [{d['wave']}]" if d.get("wave") else ""
    on = f" on {shown}" if shown else ""
    return f"{d['when']} {d['who']}{where} {d['what']}{on}: {d['why']}"


def format_unreadable(u: Unreadable) -> str:
    """An unreadable line as an operator reads it: where, why, and how it starts."""
    return f"line {u.line}: {u.reason}: {u.text!r}"


# ------------------------------------------------------------------------------------------------ writing


def _last_line(fd: int, size: int) -> tuple[int, bytes]:
    """(offset, bytes) of the file's last line, its newline included when it has one; read backwards."""
    end = size - 1  # a final newline belongs to the last line
    pos, chunk = end, 1 << 16
    while pos > 0:
        start = max(0, pos - chunk)
        block = os.pread(fd, pos - start, start)
        nl = block.rfind(b"\n")
        if nl >= 0:
            offset = start + nl + 1
            return offset, os.pread(fd, size - offset, offset)
        pos = start
    return 0, os.pread(fd, size, 0)


def _line_number(fd: int, offset: int) -> int:
    count, pos = 0, 0
    while pos < offset:
        block = os.pread(fd, min(1 << 20, offset - pos), pos)
        count += block.count(b"\n")
        pos += len(block)
    return count + 1


def _set_aside(run_dir: Path, tail: bytes) -> Path:
    """Keep a torn tail in the first free decisions.jsonl.torn-<n>, durably, before it leaves the log."""
    n = len(set_aside_files(run_dir)) + 1
    while True:
        target = RolloutStore(run_dir).torn_path(n)
        try:
            write_new(target, tail)
            return target
        except FileExistsError:
            n += 1


def _mend_tail(fd: int, run_dir: Path, path: Path) -> dict[str, Any] | None:
    """Before an append: a last line that is a whole record but for its newline is completed; one that is not a
    record (a crash or a full disk cut it short) is moved to a torn-<n> file and cut from the log, so the next
    record starts on a line of its own. Returns what was set aside (for the TORN_TAIL record), or None."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    offset, tail = _last_line(fd, size)
    complete = tail.endswith(b"\n")
    rec = parse_line(tail[:-1] if complete else tail)
    if isinstance(rec, dict):
        if not complete:
            append_whole(fd, b"\n", path)
        return None
    line = _line_number(fd, offset)
    kept = _set_aside(run_dir, tail)
    os.ftruncate(fd, offset)
    os.fsync(fd)
    return {"line": line, "bytes": len(tail), "reason": rec if complete else f"cut short, no newline: {rec}",
            "file": kept.name}


class DecisionLog:
    """Appends decisions of one run; evidence paths are kept relative to the run directory."""

    def __init__(self, run_dir: Path, run_id: str, actor: str | None = None):
        self.run_dir = Path(run_dir)
        self.path = path_of(self.run_dir)
        self.run_id = run_id
        self.actor = actor or who()
        self.set_aside: list[dict[str, Any]] = []  # torn tails this log moved aside, for the caller to report

    def _rel(self, p: str | Path) -> str:
        try:
            return str(Path(p).resolve().relative_to(self.run_dir.resolve()))
        except ValueError:
            return str(p)

    def _entry(self, what: str, why: str, step: StepId | str, wave: str | None, hosts: Iterable[str],
               evidence: Iterable[str | Path], extra: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {"when": utc_now(), "run_id": self.run_id, "who": self.actor, "what": what,
                                 "why": why, "step": str(step)}
        if wave is not None:
            entry["wave"] = wave
        entry["hosts"] = sorted(hosts)
        entry["evidence"] = [self._rel(p) for p in evidence]
        entry.update(extra)
        return entry

    def record(self, what: str, why: str, *, step: StepId | str = "", wave: str | None = None,
               hosts: Iterable[str] = (), evidence: Iterable[str | Path] = (), **extra: Any) -> dict[str, Any]:
        """Append one decision, whole or not at all (fsutil.NotWritten names the log when not); a torn last line
        found first is set aside and recorded as a TORN_TAIL decision before it."""
        entry = self._entry(what, why, step, wave, hosts, evidence, extra)
        line = (json.dumps(entry, sort_keys=False, default=str) + "\n").encode("utf-8")
        fd = open_append(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # `rollout abort` appends while the run's own process does
            torn = _mend_tail(fd, self.run_dir, self.path)
            if torn is not None:
                self.set_aside.append(torn)
                note = self._entry(TORN_TAIL, f"line {torn['line']} of {DECISIONS_FILE} ({torn['bytes']} bytes) was "
                                   f"not a whole record ({torn['reason']}): set aside in {torn['file']}, kept as it "
                                   "was, before this run appended again", "", None, (),
                                   [self.run_dir / torn["file"]], {})
                append_whole(fd, (json.dumps(note) + "\n").encode("utf-8"), self.path)
            append_whole(fd, line, self.path)
        except NotWritten as exc:
            raise NotWritten(exc.errno, f"decision {what} not recorded: {exc.strerror}", exc.filename) from None
        finally:
            os.close(fd)  # closing drops the flock
        return entry
