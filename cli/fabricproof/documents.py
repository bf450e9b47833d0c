"""Load YAML/JSON documents keeping line numbers, and validate them against the shipped schemas."""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import threading
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError, Problem
from .paths import schemas_dir

Path_ = tuple[str | int, ...]


def pointer(path: Iterable[str | int]) -> str:
    """A JSON pointer (RFC 6901) for a path of keys and indexes."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "/"


# libyaml's parser when PyYAML was built with it: ~10x faster (70 check files load in 0.02 s instead of
# 0.2 s, paid by every invocation, `check --local` under Slurm included), same nodes, marks and data.
_LineLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _walk(node: yaml.Node, path: Path_, lines: dict[Path_, int], dupes: list[tuple[Path_, int]]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                dupes.append((path + (key,), key_node.start_mark.line + 1))
            seen.add(key)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines, dupes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines, dupes)


class Document:
    """A parsed document with the line of every JSON path in it."""

    def __init__(self, data: Any, file: str, lines: dict[Path_, int] | None = None):
        self.data = data
        self.file = file
        self._lines = lines

    def line(self, path: Path_) -> int | None:
        """Line of path, or of its nearest ancestor that exists in the source."""
        if self._lines is None:
            return None
        p = tuple(path)
        while p:
            if p in self._lines:
                return self._lines[p]
            p = p[:-1]
        return self._lines.get((), None)

    def problem(self, path: Path_, message: str) -> Problem:
        return Problem(message, self.file, self.line(path), pointer(path))


#: Bounds on what a document may cost to read. An operator's baseline, plan or runbook has a few thousand values;
#: an alias bomb (nine anchors of nine aliases) expands to hundreds of millions, and libyaml's C parser crashes
#: the process on flow collections nested a hundred thousand deep.
MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 200_000
_FLOW = re.compile(r"""[\[\]{}]|"(?:[^"\\\n]|\\.)*"|'(?:[^'\n]|'')*'|#[^\n]*""")


def _flow_depth(text: str) -> int:
    """How deep flow collections ([...], {...}) nest, quoted strings and comments aside: checked before libyaml
    sees the text."""
    depth = deepest = 0
    for m in _FLOW.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
    return deepest


def _expansion(root: yaml.Node) -> tuple[int, int]:
    """(values, depth) of a composed document with every alias expanded, computed without expanding: each node's
    size and height once, however many aliases point at it."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        kids = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if children_done or not kids:
            size[id(node)] = 1 + sum(size[id(k)] for k in kids)
            height[id(node)] = 1 + max((height[id(k)] for k in kids), default=0)
            continue
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
    return size[id(root)], height[id(root)]


def _check_bounds(text: str, file: str) -> None:
    if len(text) > MAX_BYTES:
        raise InputError(Problem(f"the document is larger than {MAX_BYTES >> 20} MiB", file))
    if _flow_depth(text) > MAX_DEPTH:
        raise InputError(Problem(f"collections nest deeper than {MAX_DEPTH} levels", file))


def _syntax_problem(exc: yaml.YAMLError, text: str, file: str) -> Problem:
    """Where a YAML syntax error is, as lines of the file: the parser gives up one line past the end when a
    construct is never closed, so the end is named as such, together with where the construct opened."""
    last = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))

    def at(mark: Any) -> tuple[int, str]:
        if mark.line + 1 > last or (mark.line + 1 == last and mark.column >= len(text.splitlines()[-1] or "")
                                     and text.endswith("\n")):
            return last, "at the end of the file"
        return mark.line + 1, f"at line {mark.line + 1}, column {mark.column + 1}"

    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    problem_mark = getattr(exc, "problem_mark", None)
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    line, where = at(problem_mark) if problem_mark else (None, "")
    if context and context_mark:
        opened, opened_where = at(context_mark)
        message = f"YAML syntax error: {reason} {where}, {context} opened {opened_where}"
        return Problem(message, file, opened if where == "at the end of the file" else line)
    return Problem(f"YAML syntax error: {reason}" + (f" {where}" if where else ""), file, line)


def parse_yaml(text: str, file: str, max_values: int = MAX_VALUES) -> Document:
    """The document and the line of every path in it, from one parse: the data is built from the nodes composed
    for the lines (parsing the text again took ~40% of loading the catalog, which every check --local does)."""
    _check_bounds(text, file)
    loader = _LineLoader(text)
    try:
        return _from_nodes(loader, text, file, max_values)
    finally:
        loader.dispose()


def _from_nodes(loader: Any, text: str, file: str, max_values: int = MAX_VALUES) -> Document:
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise InputError(_syntax_problem(exc, text, file)) from None
    if node is None:
        raise InputError(Problem("the document is empty", file, 1))
    values, depth = _expansion(node)
    if values > max_values:
        raise InputError(Problem(f"the document expands to {values:,} values (YAML anchors and aliases), more than "
                                 f"the {max_values:,} a fabricproof document may hold", file))
    if depth > MAX_DEPTH:
        raise InputError(Problem(f"collections nest deeper than {MAX_DEPTH} levels", file))
    lines: dict[Path_, int] = {}
    dupes: list[tuple[Path_, int]] = []
    _walk(node, (), lines, dupes)
    if dupes:
        raise InputError([Problem(f"duplicate key {p[-1]!r}", file, ln, pointer(p)) for p, ln in dupes])
    return Document(loader.construct_document(node), file, lines)  # a safe loader (CSafeLoader or SafeLoader)


#: A JSON document fabricproof wrote itself (a host's facts, run.json, state.json) may be larger than an operator's
#: YAML, but never this large: the cap that keeps /dev/zero or a runaway file from filling memory.
MAX_JSON_BYTES = 64 * 1024 * 1024


def read_bytes(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """A document's bytes, read at most `max_bytes` (+1) bytes far: a device or a runaway file (/dev/zero, a log)
    is refused once the cap is passed, never read whole first."""
    try:
        with open(path, "rb") as fh:
            # Asked for the cap at once, read() allocates it (64 MiB for JSON) before reading a 170 KB facts file:
            # ~0.14 ms a file of 0.17. A regular file's size (one byte more, to see it grew) is read first; a file
            # that grew, a device or a pipe (size 0) is read on to the cap.
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(min(size, max_bytes) + 1)
            if len(data) > size:
                data += fh.read(max_bytes + 1 - len(data))
    except FileNotFoundError:
        raise InputError(Problem("file not found", str(path))) from None
    except IsADirectoryError:
        raise InputError(Problem("is a directory, expected a file", str(path))) from None
    except OSError as exc:
        raise InputError(Problem(f"cannot read: {exc}", str(path))) from None
    if len(data) > max_bytes:
        raise InputError(Problem(f"the document is larger than {max_bytes >> 20} MiB", str(path)))
    return data


def _utf8(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(Problem(f"cannot read: {exc}", str(path))) from None


def read_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """A document's text (UTF-8), read as read_bytes reads it."""
    return _utf8(read_bytes(path, max_bytes), path)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def regular_file(path: Path, why: str) -> None:
    """Exit 2 unless path (its symlinks followed) is a regular file, saying what it is and `why` a file is needed."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(Problem("file not found", str(path))) from None
    except OSError as exc:
        raise InputError(Problem(f"cannot read: {exc.strerror}", str(path))) from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise InputError(Problem(f"is {kind}, not a regular file: {why}", str(path)))


def load_yaml(path: Path, max_values: int = MAX_VALUES) -> Document:
    return parse_yaml(read_text(path), str(path), max_values)


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        raise _DuplicateKey()
    return doc


def _fast_json(data: bytes) -> Any:
    """msgspec's reading of a JSON document when it is certainly json's reading too, else _SLOW.

    msgspec decodes ~2x faster than json with the duplicate-key hook (a lab host's 170 KB of facts) but keeps the
    last of duplicate keys silently. Every member in the text has one ':' of its own and the ':' of its strings;
    msgspec writes them all back and escapes none, so a document whose text has as many ':' as its re-encoding lost
    no member to a duplicate key. A ':' written as an escape (\\u003a) would break the count: such a text, and
    anything msgspec refuses (NaN, Infinity, 1e400, lone surrogates, a BOM, deep nesting, a syntax error), is read
    by json, which gives the messages. (orjson, ~as fast, reads integers past 64 bits as floats.)"""
    if _escaped_colon(data):
        return _SLOW
    msgspec, decoder, encoder = _msgspec()
    again = _again()
    try:
        doc = decoder.decode(data)
        encoder.encode_into(doc, again)
    except (msgspec.MsgspecError, RecursionError):
        return _SLOW
    try:
        if data.startswith(again) and data[len(again):].isspace():
            return doc  # the text is its own re-encoding (as the run store writes facts): no member can be missing
        return doc if again.count(b":") == data.count(b":") else _SLOW
    finally:
        if len(again) > _AGAIN_KEPT:
            _AGAIN.buffer = bytearray()  # a large document's re-encoding is not held after it


#: Each thread's buffer for _fast_json's re-encoding, reused: a new bytes object a document took 20-30% longer (its
#: ~170 KB allocated and freed each time). Up to _AGAIN_KEPT bytes stay held between documents.
_AGAIN = threading.local()
_AGAIN_KEPT = 1 << 20


def _again() -> bytearray:
    buffer = getattr(_AGAIN, "buffer", None)
    if buffer is None:
        buffer = _AGAIN.buffer = bytearray()
    return buffer


def _escaped_colon(data: bytes) -> bool:
    """Whether the text holds a ':' written as an escape (\\u003a or \\u003A), looked for at its backslashes (~30 in
    a lab host's facts), each found by memchr: two searches of the whole text for the six bytes took ~180 us of a
    170 KB file's ~1.3 ms, this ~14. A text of many backslashes is searched whole past the first 64, in C."""
    i = data.find(b"\\")
    for _ in range(64):
        if i < 0:
            return False
        if data[i + 1:i + 6] in (b"u003a", b"u003A"):
            return True
        i = data.find(b"\\", i + 1)
    return i >= 0 and (data.find(b"\\u003a", i) >= 0 or data.find(b"\\u003A", i) >= 0)


@cache
def _msgspec() -> tuple[Any, Any, Any]:
    """msgspec and its JSON decoder and encoder, imported when a JSON document is first read: `check --local`, which
    reads none, does not pay its import (~0.02 s of CPU, decimal's most of it)."""
    import msgspec

    return msgspec, msgspec.json.Decoder(), msgspec.json.Encoder()


_SLOW = object()


def load_json(path: Path) -> Document:
    """JSON is parsed with msgspec when that is safe (_fast_json), else json; line numbers are recovered only when
    an error needs them. Duplicate keys are errors, as in YAML (json would keep the last one silently), and so is
    nesting the parser cannot hold."""
    raw = read_bytes(path, MAX_JSON_BYTES)
    data = _fast_json(raw)
    if data is not _SLOW:
        return _LazyLinesDocument(data, str(path), raw)
    text = _utf8(raw, path)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(Problem(f"JSON syntax error: {exc.msg}", str(path), exc.lineno)) from None
    except RecursionError:
        raise InputError(Problem("JSON nested too deeply to read", str(path))) from None
    except _DuplicateKey:
        _check_bounds(text, str(path))
        dupes: list[tuple[Path_, int]] = []
        _walk(yaml.compose(text, Loader=_LineLoader), (), {}, dupes)  # JSON is YAML: find where, for the message
        raise InputError([Problem(f"duplicate key {p[-1]!r}", str(path), ln, pointer(p)) for p, ln in dupes]
                         or Problem("duplicate key", str(path))) from None
    return _LazyLinesDocument(data, str(path), text)


class _LazyLinesDocument(Document):
    def __init__(self, data: Any, file: str, text: str | bytes):
        super().__init__(data, file, None)
        self._text = text

    def line(self, path: Path_) -> int | None:
        if self._lines is None:
            try:
                lines: dict[Path_, int] = {}
                text = self._text.decode("utf-8") if isinstance(self._text, bytes) else self._text
                _walk(yaml.compose(text, Loader=_LineLoader), (), lines, [])
                self._lines = lines
            except yaml.YAMLError:
                self._lines = {}
        return super().line(path)


@cache
def schema(name: str) -> dict[str, Any]:
    """A shipped JSON Schema by file stem, e.g. 'baseline' -> schemas/baseline.schema.json."""
    return json.loads((schemas_dir() / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def validator(name: str):
    """jsonschema's validator of a shipped schema: slow (~57 ms for a host's facts), but it explains every
    violation with its path and the messages operators see; validate() asks it only about invalid documents."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema(name))


@cache
def compiled(name: str) -> Any:
    """jsonschema-rs's validator of a shipped schema: it decides whether a document is valid in ~0.25 ms for a
    host's facts (jsonschema: ~57; fastjsonschema's generated code ~2.2 after a 0.6 s compile per process, and
    it stops at the first error). Formats are annotations in 2020-12, as jsonschema treats them."""
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator(schema(name), validate_formats=False)


def _extra_keys(error: Any) -> list[str]:
    if error.validator not in ("additionalProperties", "unevaluatedProperties") or not isinstance(error.instance, dict):
        return []
    allowed = set(error.schema.get("properties", {}))
    return sorted(k for k in error.instance if k not in allowed)


def validate(doc: Document, schema_name: str, base: Path_ = ()) -> None:
    """Raise InputError listing every schema violation with file:line and JSON path. The compiled validator
    passes valid documents; jsonschema stays the judge of the rest (it names every violation, and a document it
    finds valid is valid, as before)."""
    if compiled(schema_name).is_valid(doc.data):
        return
    errors = sorted(validator(schema_name).iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return
    problems: list[Problem] = []
    for err in errors:
        path = base + tuple(err.absolute_path)
        extras = _extra_keys(err)
        if extras:
            allowed = list(err.schema.get("properties", {}))
            for key in extras:
                hint = difflib.get_close_matches(key, allowed, n=1)
                tip = f"; did you mean {hint[0]!r}?" if hint else f"; allowed: {', '.join(allowed)}"
                problems.append(doc.problem(path + (key,), f"unknown key {key!r}{tip}"))
            continue
        problems.append(doc.problem(path, _message(err)))
    raise InputError(problems)


def _message(err: Any) -> str:
    if err.validator == "required":
        return err.message.replace("is a required property", "is required")
    if err.validator in ("oneOf", "anyOf") and err.context:
        best = min(err.context, key=lambda e: len(e.message))
        return best.message
    return err.message
