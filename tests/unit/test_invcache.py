"""The inventory cache's key and entries: what makes an inventory cacheable, what changes the key, how entries are
kept (owner-only, whole, a bad one a miss). Files in tmp dirs; Ansible is never run here."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from fabricproof import cache as store
from fabricproof import invcache, toolpath

EXE = toolpath.find("ansible-inventory") or ""
INVENTORY = "all:\n  children:\n    gpu:\n      hosts:\n        h1: {ansible_host: 127.0.0.2}\n"


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    """A static YAML inventory with group_vars and host_vars beside it."""
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "inventory.yml").write_text(INVENTORY)
    (tmp_path / "group_vars" / "gpu.yml").write_text("x: 1\n")
    (tmp_path / "host_vars" / "h1.yml").write_text("y: 2\n")
    return tmp_path / "inventory.yml"


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), **more}


def _key(inv: Path, env: dict[str, str]) -> str | None:
    files = invcache.inputs(inv)
    assert files is not None
    return invcache.key(str(inv), files, EXE, env)


def test_a_static_file_is_read_with_its_group_vars_and_host_vars(inv: Path) -> None:
    assert invcache.inputs(inv) == sorted([inv, inv.parent / "group_vars" / "gpu.yml", inv.parent / "host_vars" / "h1.yml"])


def test_a_directory_inventory_is_every_file_in_it(inv: Path) -> None:
    (inv.parent / "more").mkdir()
    (inv.parent / "more" / "b.ini").write_text("[b]\nh2\n")
    files = invcache.inputs(inv.parent)
    assert files is not None and inv.parent / "more" / "b.ini" in files and inv in files
    assert inv.parent / "group_vars" / "gpu.yml" in files


@pytest.mark.skipif(not EXE, reason="ansible-inventory is not installed")
def test_the_key_changes_with_every_input(inv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    env = _env(tmp_path)
    keys = {_key(inv, env)}
    monkeypatch.chdir(tmp_path)  # no ansible.cfg in either working directory: the same answer, the same key
    assert _key(inv, env) in keys
    for f, text in ((inv, INVENTORY + "        h2: {}\n"), (inv.parent / "group_vars" / "gpu.yml", "x: 3\n"),
                    (inv.parent / "host_vars" / "h1.yml", "y: 3\n"), (tmp_path / "ansible.cfg", "[defaults]\n"),
                    (tmp_path / "home" / ".ansible.cfg", "[defaults]\n")):
        f.parent.mkdir(exist_ok=True)
        f.write_text(text)
        keys.add(_key(inv, env))
    (inv.parent / "group_vars" / "all.yml").write_text("z: 1\n")  # a new vars file
    keys.add(_key(inv, env))
    keys.add(_key(inv, {**env, "ANSIBLE_INVENTORY_ENABLED": "yaml"}))
    keys.add(_key(inv, {**env, "ANSIBLE_CONFIG": str(tmp_path / "other.cfg")}))
    assert None not in keys and len(keys) == 9
    assert _key(inv, env) == _key(inv, {**env, "UNRELATED": "1"})  # and nothing else changes it


@pytest.mark.skipif(not EXE, reason="ansible-inventory is not installed")
def test_the_same_tree_elsewhere_has_the_same_key_and_a_name_in_it_changes_it(inv: Path, tmp_path: Path) -> None:
    """`ansible-inventory --list` answers the same for a copy of the tree (it leaves out inventory_dir and
    inventory_file and renders no template: tests/cli/test_inventory_cache.py shows it), so a copy is a hit; the
    inventory's name (which picks the plugin) and a vars file's name (its group or host) are still in the key."""
    env = _env(tmp_path)
    copy = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(inv.parent, copy)
    assert _key(copy / inv.name, env) == _key(inv, env)
    (copy / inv.name).rename(copy / "inventory.yaml")
    assert _key(copy / "inventory.yaml", env) != _key(inv, env)
    (copy / "inventory.yaml").rename(copy / inv.name)
    (copy / "group_vars" / "gpu.yml").rename(copy / "group_vars" / "all.yml")
    assert _key(copy / inv.name, env) != _key(inv, env)


def test_a_script_inventory_is_never_cacheable(inv: Path) -> None:
    inv.chmod(0o755)
    assert invcache.inputs(inv) is None
    assert invcache.inputs(inv.parent) is None  # nor a directory holding one
    inv.chmod(0o644)
    (inv.parent / "sub").mkdir()
    (inv.parent / "sub" / "ec2.py").write_text("#!/bin/sh\n")
    (inv.parent / "sub" / "ec2.py").chmod(0o755)
    assert invcache.inputs(inv.parent) is None  # at any depth


def test_hidden_names_are_what_ansible_skips_and_an_executable_vars_file_is_read_not_run(inv: Path) -> None:
    """A git checkout of an inventory (its hooks executable) stays cacheable; so does a chmod -R 755 of the vars."""
    (inv.parent / ".git" / "hooks").mkdir(parents=True)
    (inv.parent / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (inv.parent / ".git" / "hooks" / "pre-commit").chmod(0o755)
    (inv.parent / "group_vars" / "gpu.yml").chmod(0o755)
    files = invcache.inputs(inv.parent)
    assert files is not None and not any(".git" in f.parts for f in files)
    assert inv.parent / "group_vars" / "gpu.yml" in files


@pytest.mark.skipif(not EXE, reason="ansible-inventory is not installed")
def test_a_plugin_config_or_a_vault_file_is_never_cacheable(inv: Path, tmp_path: Path) -> None:
    inv.write_text("plugin: ansible.builtin.constructed\nstrict: true\n")
    assert _key(inv, _env(tmp_path)) is None
    inv.write_text(INVENTORY)
    (inv.parent / "group_vars" / "gpu.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    assert _key(inv, _env(tmp_path)) is None
    (inv.parent / "group_vars" / "gpu.yml").write_text("token: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n")
    assert _key(inv, _env(tmp_path)) is None
    (inv.parent / "group_vars" / "gpu.yml").write_text("x: 1\n")
    assert _key(inv, _env(tmp_path)) is not None


def test_vars_plugins_beside_it_or_an_ansible_of_another_interpreter_is_not_cacheable(inv: Path, tmp_path: Path) -> None:
    assert invcache.key(str(inv), invcache.inputs(inv) or [], "/usr/bin/ansible-inventory", _env(tmp_path)) is None
    (inv.parent / "vars_plugins").mkdir()
    assert invcache.inputs(inv) is None


def test_no_cache_and_where_it_lives() -> None:
    assert invcache.disabled({"FABRICPROOF_NO_CACHE": "1"}) and not invcache.disabled({"FABRICPROOF_NO_CACHE": "0"})
    assert invcache.directory({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/fabricproof/inventory")
    assert invcache.directory({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/fabricproof/inventory")
    # A daemon's run (slurmd's HealthCheckProgram, a systemd unit, cron) has neither: the state directory's cache.
    assert invcache.directory({}) == Path("/var/lib/fabricproof/cache/inventory")
    assert invcache.directory({"FABRICPROOF_STATE_DIR": "/s", "HOME": "rel"}) == Path("/s/cache/inventory")


def test_entries_are_owner_only_and_read_back(tmp_path: Path) -> None:
    cache = tmp_path / "xdg" / "fabricproof" / "inventory"
    store.keep(cache, "k", '{"all": {"hosts": ["h1"]}}', most=invcache.KEEP)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "k.json").stat().st_mode) == 0o600
    assert store.load(cache, "k") == {"all": {"hosts": ["h1"]}}
    assert store.load(cache, "other") is None


def test_a_corrupt_or_shared_entry_is_a_miss(tmp_path: Path) -> None:
    cache = tmp_path / "inventory"
    store.keep(cache, "k", '{"all": {}}', most=invcache.KEEP)
    (cache / "k.json").write_text('{"all": ')  # cut short
    assert store.load(cache, "k") is None
    (cache / "k.json").write_text("[1, 2]")
    assert store.load(cache, "k") is None
    (cache / "k.json").write_text('{"all": {}}')
    os.chmod(cache / "k.json", 0o666)  # another user could have written it
    assert store.load(cache, "k") is None
    os.chmod(cache / "k.json", 0o600)
    os.chmod(cache, 0o777)
    assert store.load(cache, "k") is None
    store.keep(cache, "k2", "{}", most=invcache.KEEP)  # writing again makes the directory owner-only again
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700 and store.load(cache, "k") == {"all": {}}


def test_the_oldest_entries_go_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invcache, "KEEP", 3)
    cache = tmp_path / "inventory"
    for n in range(5):
        store.keep(cache, f"k{n}", "{}", most=invcache.KEEP)
        os.utime(cache / f"k{n}.json", (n, n))
    store.keep(cache, "k5", "{}", most=invcache.KEEP)
    assert sorted(p.name for p in cache.iterdir()) == ["k3.json", "k4.json", "k5.json"]


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    store.keep(tmp_path / "file" / "inventory", "k", "{}", most=invcache.KEEP)  # a file where the directory would go
    assert store.load(tmp_path / "file" / "inventory", "k") is None
