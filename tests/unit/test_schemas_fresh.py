"""The committed schemas are exactly what `python -m fabricproof.schemagen` writes from the Python vocabularies."""

from __future__ import annotations

import json
import shutil
from functools import cache

import jsonschema
import pytest
from fabricproof import schemagen
from fabricproof.paths import schemas_dir

@cache
def _stale() -> dict[str, str]:
    # Generated on first use, not at import: every xdist worker collects this module (~0.5 s of CPU each).
    return schemagen.stale()


@pytest.mark.parametrize("name", sorted(p.name for p in schemas_dir().glob("*.schema.json")))
def test_committed_schema_is_what_the_generator_writes(name):
    stale = _stale()
    if name in stale:
        pytest.fail(f"schemas/{name} is stale: run `{schemagen.COMMAND}`\n{stale[name]}", pytrace=False)


def test_every_schema_is_valid_2020_12_and_every_ref_resolves():
    for path in sorted(schemas_dir().glob("*.schema.json")):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        refs = [v for v in _values(schema, "$ref")]
        for ref in refs:
            assert ref.startswith("#/$defs/") and ref.removeprefix("#/$defs/") in schema["$defs"], (path.name, ref)


def test_no_schema_spells_out_a_vocabulary_outside_its_defs_entry():
    vocabularies = {name: set(map(json.dumps, v.values())) for name, v in schemagen.VOCABULARIES.items()}
    for path in sorted(schemas_dir().glob("*.schema.json")):
        if path.name == schemagen.FACTS:  # generated whole from the collectors, the source of some vocabularies
            continue
        schema = json.loads(path.read_text())
        rest = {**schema, "$defs": {k: v for k, v in schema.get("$defs", {}).items() if k not in vocabularies}}
        for enum in _values(rest, "enum"):
            copied = [name for name, values in vocabularies.items() if set(map(json.dumps, enum)) == values]
            assert not copied, f"{path.name}: enum {enum} copies $defs/{copied[0]}; use {{\"$ref\": \"#/$defs/{copied[0]}\"}}"


def _values(node, key):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            else:
                yield from _values(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _values(v, key)


@pytest.fixture
def schemas(tmp_path):
    shutil.copytree(schemas_dir(), tmp_path / "schemas")
    return tmp_path / "schemas"


def test_check_names_a_stale_file_and_the_command_and_writing_fixes_it(schemas, capsys):
    path = schemas / "rollout.schema.json"
    committed = path.read_text()
    path.write_text(committed.replace('"prometheus", ', ""))
    assert schemagen.main(["--check", "--dir", str(schemas)]) == 1
    err = capsys.readouterr().err
    assert "schemas/rollout.schema.json is stale: run `python -m fabricproof.schemagen`" in err
    assert '+    "reporter": ' in err and '"prometheus"' in err
    assert schemagen.main(["--dir", str(schemas)]) == 0
    assert path.read_text() == committed
    assert schemagen.main(["--check", "--dir", str(schemas)]) == 0


def test_generator_keeps_every_byte_outside_the_vocabularies(schemas):
    path = schemas / "check.schema.json"
    edited = path.read_text().replace('"Catalog folder the check lives in."', '"Catalog folder  of the check."')
    path.write_text(edited)
    assert schemagen.generate(schemas)["check.schema.json"] == edited


def test_a_schema_without_its_vocabulary_entry_is_an_error_naming_it(schemas, capsys):
    path = schemas / "runbook.schema.json"
    path.write_text(path.read_text().replace('"severity": {"$comment"', '"sev": {"$comment"'))
    assert schemagen.main(["--check", "--dir", str(schemas)]) == 2
    assert "schemas/runbook.schema.json has no $defs/severity" in capsys.readouterr().err
