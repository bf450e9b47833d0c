"""Reading and validating documents fast changes no reading and no verdict: msgspec's reading is taken only where it
is json's, the compiled validator only passes what jsonschema passes, and jsonschema still explains the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricproof import documents
from fabricproof.judging import baseline as baseline_mod
from fabricproof.judging import catalog

REPO = Path(__file__).resolve().parents[2]
LAB_FACTS = sorted((REPO / "inventories" / "lab" / "facts").glob("*.json"))

#: Texts json reads one way and a careless fast reader another (or not at all): each must come out as json reads it.
TRICKY = [
    '{"a": 1e-05, "b": 3.5e-09, "c": 1E+16, "d": -0.0, "e": 0.1}',
    '{"big": 12345678901234567890123, "n": -9223372036854775809}',
    '{"nan": NaN, "inf": Infinity, "huge": 1e400}',
    '{"s": "\\u001f\\u2028\\ud83d\\ude00 caf\\u00e9", "t": "a\\"b\\\\c:d"}',
    '{\n  "indented": [1, 2, {"x": "y: z"}],\n  "k" : "v"\n}\n',
    '\ufeff{"bom": 1}',
    '"\\ud800 lone surrogate"',
    "[" * 1100 + "]" * 1100,
]
#: Texts with a key given twice: json with the duplicate-key hook refuses them; so must the fast reader.
DUPLICATES = [
    '{"a":1,"a":2}',
    '{"host":"n1","collectors":{},"host":"n2"}',
    '{"a": {"k": "x:y", "k": "x:y"}}',
    # An escaped ':' adds to the re-encoding what the duplicate removed: the count alone would be fooled.
    '{"a":"\\u003a","a":"b"}',
    '{"a":"\\u003A","a":"b"}',
]


def _json(text: str):
    return json.loads(text, object_pairs_hook=documents._no_duplicates)


@pytest.mark.parametrize("text", TRICKY)
def test_the_fast_reading_is_json_s_or_none(text):
    data = text.encode("utf-8", "surrogatepass")
    fast = documents._fast_json(data)
    if fast is documents._SLOW:
        return
    assert fast == _json(text) and type(fast) is type(_json(text))


@pytest.mark.parametrize("text", DUPLICATES)
def test_a_duplicate_key_is_never_read_fast(text):
    assert documents._fast_json(text.encode()) is documents._SLOW
    with pytest.raises(documents._DuplicateKey):
        _json(text)


@pytest.mark.parametrize("path", LAB_FACTS, ids=lambda p: p.stem)
def test_facts_written_by_fabricproof_are_read_fast_and_as_json_reads_them(path):
    raw = path.read_bytes()
    fast = documents._fast_json(raw)
    assert fast is not documents._SLOW
    assert fast == _json(raw.decode())


def test_valid_documents_never_reach_the_slow_validator(monkeypatch):
    """Every shipped check, the lab baseline and the lab facts are passed by the compiled validator alone: the
    pure-Python one (~57 ms for a host's facts) is asked only about invalid documents."""
    def slow(_name):
        raise AssertionError("jsonschema asked about a valid document")

    monkeypatch.setattr(documents, "validator", slow)
    for path in LAB_FACTS:
        documents.validate(documents.load_json(path), "facts")
    baseline_mod.load(REPO / "inventories" / "lab" / "baseline.yaml")
    assert len(catalog.load()) > 90


#: Ways to break a lab facts document, each applied to a fresh copy in its test (not at collection: every xdist worker
#: collects, and deep copies of a 170 KB document made there cost each of them ~0.45 s).
BREAKS = {
    "wrong type": lambda d: d["gpu"].__setitem__("gpus", "eight"),
    "unknown key": lambda d: d.__setitem__("gpuu", {}),
    "missing required": lambda d: d.pop("collectors"),
    "bad enum": lambda d: next(iter(d["collectors"].values())).__setitem__("status", "fine"),
    "bad const": lambda d: d.__setitem__("kind", "Fact"),
    "bool for a number": lambda d: next(iter(d["collectors"].values())).__setitem__("duration_s", True),
    "empty host": lambda d: d.__setitem__("host", ""),
}


@pytest.mark.parametrize("name", BREAKS)
def test_invalid_facts_are_refused_by_both_validators_with_their_path(name, tmp_path):
    doc = json.loads(LAB_FACTS[0].read_text())
    BREAKS[name](doc)
    assert not documents.compiled("facts").is_valid(doc), name
    path = tmp_path / "h.json"
    path.write_text(json.dumps(doc, indent=1))
    with pytest.raises(documents.InputError) as err:
        documents.validate(documents.load_json(path), "facts")
    problem = err.value.problems[0]
    assert problem.file == str(path) and problem.line and problem.pointer.startswith("/")


SHIPPED_YAML = sorted([*(REPO / "checks").rglob("*.yaml"), *(REPO / "inventories").rglob("*.yaml")])


def test_a_yaml_document_is_parsed_once_and_reads_as_yaml_reads_it(monkeypatch):
    import yaml

    expected = {p: yaml.load(p.read_text(), Loader=documents._LineLoader) for p in SHIPPED_YAML}  # noqa: S506

    def again(*_args, **_kwargs):
        raise AssertionError("the text parsed a second time")

    monkeypatch.setattr(yaml, "load", again)
    monkeypatch.setattr(yaml, "compose", again)
    assert len(SHIPPED_YAML) > 100
    for path, data in expected.items():
        doc = documents.load_yaml(path)
        assert doc.data == data, path
        assert doc.line(()) is not None


def test_a_facts_file_is_read_into_about_its_size_not_the_cap(tmp_path):
    """read_bytes asked for the 64 MiB cap at once, and read() allocated it for every 170 KB facts file (~0.14 ms a
    file). It reads a regular file's size now; what grows past it, and the cap, are as before."""
    import tracemalloc

    path = tmp_path / "n1.json"
    text = LAB_FACTS[0].read_bytes()
    path.write_bytes(text)
    tracemalloc.start()
    try:
        data = documents.read_bytes(path, documents.MAX_JSON_BYTES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == text
    assert peak < 4 * len(text) < documents.MAX_JSON_BYTES
    path.write_bytes(b"x" * 2000)
    with pytest.raises(documents.InputError, match="larger than 0 MiB"):
        documents.read_bytes(path, 1000)
    assert documents.read_bytes(path, 2000) == b"x" * 2000
