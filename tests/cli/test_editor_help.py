"""Editor help: every example baseline, plan and runbook names its schema in a yaml-language-server modeline that
resolves, relative to the file, to the schema of its kind, which it satisfies; `schema export` writes
self-contained schemas and prints the modeline an operator's own files then carry."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

from .helpers import REPO, run

MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")
KINDS = {"Baseline": "baseline", "RolloutPlan": "rollout", "Runbook": "runbook"}
EXAMPLES = sorted(p for p in (REPO / "inventories").rglob("*.y*ml")
                  if "ci" not in p.relative_to(REPO / "inventories").parts[:1]
                  and re.search(r"^kind: *(Baseline|RolloutPlan|Runbook)\b", p.read_text(), re.M))


def _schema_of(path: Path) -> Path:
    first = path.read_text().splitlines()[0]
    m = MODELINE.match(first)
    assert m, f"{path}: first line is not a yaml-language-server modeline: {first!r}"
    return (path.parent / m.group(1)).resolve()


def _validate(doc_path: Path, schema_path: Path) -> list[str]:
    schema = json.loads(schema_path.read_text())
    doc = yaml.safe_load(doc_path.read_text())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


def test_there_are_examples_of_every_kind():
    kinds = {yaml.safe_load(p.read_text())["kind"] for p in EXAMPLES}
    assert kinds == set(KINDS) and len(EXAMPLES) >= 12


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_names_the_schema_of_its_kind_and_satisfies_it(path):
    schema = _schema_of(path)
    kind = yaml.safe_load(path.read_text())["kind"]
    assert schema == REPO / "schemas" / f"{KINDS[kind]}.schema.json"
    assert _validate(path, schema) == []


def test_schema_export_writes_what_editors_load_and_prints_the_modeline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run("schema", "export", ".schemas")
    assert res.exit_code == 0, res.output
    exported = sorted(p.name for p in (tmp_path / ".schemas").iterdir())
    assert exported == sorted(p.name for p in (REPO / "schemas").glob("*.schema.json"))
    for name in exported:  # a copy, self-contained: an editor resolves every $ref inside the file itself
        text = (tmp_path / ".schemas" / name).read_text()
        assert text == (REPO / "schemas" / name).read_text()
        refs = re.findall(r'"\$ref": "([^"]*)"', text)
        assert all(r.startswith("#") for r in refs), (name, [r for r in refs if not r.startswith("#")])
    line = "# yaml-language-server: $schema=.schemas/baseline.schema.json"
    assert f"Baseline       {line}" in res.stdout
    # an operator's own baseline, next to the exported schemas, with the printed modeline: the editor's view of it
    mine = tmp_path / "baseline.yaml"
    mine.write_text(line + "\n" + (REPO / "inventories" / "dgx-h100" / "baseline.yaml").read_text().split("\n", 1)[1])
    assert _schema_of(mine) == tmp_path / ".schemas" / "baseline.schema.json"
    assert _validate(mine, _schema_of(mine)) == []
    mine.write_text(mine.read_text().replace("links_per_gpu:", "link_per_gpu:"))  # the commonest typo
    assert any("link_per_gpu" in problem for problem in _validate(mine, _schema_of(mine)))
    shutil.rmtree(tmp_path / ".schemas")


@pytest.mark.parametrize("platform", ["lab", "dgx-h100", "gb200-nvl72"])
def test_init_writes_files_whose_modelines_name_the_copied_schema_of_their_kind(tmp_path, platform):
    res = run("init", "--platform", platform, tmp_path / "fabric")
    assert res.exit_code == 0, res.output
    written = [p for p in (tmp_path / "fabric").rglob("*.y*ml") if p.name != "fabricproof.yaml"
               and p.parent.name != ".schemas" and "kind:" in p.read_text()]
    assert len(written) >= 3
    for path in written:
        schema = _schema_of(path)
        kind = yaml.safe_load(path.read_text())["kind"]
        assert schema == (tmp_path / "fabric" / ".schemas" / f"{KINDS[kind]}.schema.json").resolve(), path
        assert schema.read_text() == (REPO / "schemas" / schema.name).read_text()
        assert _validate(path, schema) == [], path
