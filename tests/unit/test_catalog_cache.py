"""The packaged catalog is kept once loaded (cache.py) and read back only while it is safe and current: the kept
file is this user's own, no one else may change it, it is no link, and its key is the catalog's files, schema and
code as they are now. Anything else loads the catalog afresh, as before."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from fabricproof import cache
from fabricproof.collectors import COLLECTORS
from fabricproof.judging import catalog
from fabricproof.paths import checks_dir

NOBODY = 65534


def kept_file(state: Path) -> Path:
    return state / cache.CACHE_DIR / f"{catalog.CACHE_NAME}.json"


def retitled(state: Path, title: str) -> None:
    """The kept copy with every title changed, its key kept: a load that returns this title read the kept copy."""
    path = kept_file(state)
    doc = json.loads(path.read_text())
    for check in doc["data"]:
        check["title"] = title
    path.write_text(json.dumps(doc))


def test_the_packaged_catalog_is_kept_owner_only_and_read_back_equal(private_state_dir):
    first = catalog.load()
    path = kept_file(private_state_dir)
    assert not path.exists()  # a load alone writes nothing: a run refused for bad input leaves nothing behind
    catalog.keep()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert catalog.load() == first  # read back: every field, enums and tuples included
    retitled(private_state_dir, "kept")
    assert {c.title for c in catalog.load()} == {"kept"}  # the kept copy is what a later run reads


@pytest.mark.parametrize("spoil", ["group-writable file", "other-writable directory", "someone else's file",
                                   "someone else's directory", "a link", "not json", "not checks", "another key"])
def test_a_kept_catalog_that_is_not_safe_or_not_current_is_not_read(private_state_dir, tmp_path, spoil):
    fresh = catalog.load()
    catalog.keep()
    retitled(private_state_dir, "spoiled")
    path = kept_file(private_state_dir)
    if spoil == "group-writable file":
        path.chmod(0o620)
    elif spoil == "other-writable directory":
        path.parent.chmod(0o702)
    elif spoil == "someone else's file":
        os.chown(path, NOBODY, NOBODY)
    elif spoil == "someone else's directory":
        os.chown(path.parent, NOBODY, NOBODY)
    elif spoil == "a link":
        target = tmp_path / "elsewhere.json"
        shutil.move(path, target)
        path.symlink_to(target)
    elif spoil == "not json":
        path.write_text("{not json")
    elif spoil == "not checks":
        doc = json.loads(path.read_text())
        doc["data"] = [{"id": 1}]
        path.write_text(json.dumps(doc))
    elif spoil == "another key":
        doc = json.loads(path.read_text())
        doc["key"] = "0" * 64
        path.write_text(json.dumps(doc))
    assert catalog.load() == fresh  # loaded afresh from the YAML files


def test_the_key_is_every_check_file_the_schema_and_what_loading_reads_of_the_collectors(tmp_path):
    root = tmp_path / "checks"
    shutil.copytree(checks_dir(), root)
    paths = sorted(root.rglob("*.yaml"))
    key = catalog._cache_key(root, paths, COLLECTORS)
    assert catalog._cache_key(root, paths, COLLECTORS) == key
    paths[5].write_bytes(paths[5].read_bytes() + b"\n")  # one byte more in one check file
    assert catalog._cache_key(root, paths, COLLECTORS) != key
    renamed = paths[5].with_name("zz-" + paths[5].name)
    paths[5].rename(renamed)
    assert catalog._cache_key(root, sorted(root.rglob("*.yaml")), COLLECTORS) != key
    some = dict(COLLECTORS)
    cid = next(iter(some))
    some[cid] = type("Other", (), {"provides": "/elsewhere", "loads_fabric": False, "fabric_scope": False})()
    assert catalog._cache_key(root, paths[:5], some) != catalog._cache_key(root, paths[:5], COLLECTORS)


def test_only_the_packaged_catalog_with_the_registry_is_kept(private_state_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "_unkept", None)  # nothing left by another test's load
    root = tmp_path / "checks"
    shutil.copytree(checks_dir(), root)
    catalog.load(root)
    catalog.load(collectors=COLLECTORS)
    catalog.keep()
    assert not kept_file(private_state_dir).exists()


def test_a_state_directory_that_cannot_keep_it_changes_nothing(private_state_dir):
    (private_state_dir / cache.CACHE_DIR).write_text("a file where the cache directory goes")
    assert len(catalog.load()) == len(list(checks_dir().rglob("*.yaml")))
    catalog.keep()
    assert (private_state_dir / cache.CACHE_DIR).is_file()
