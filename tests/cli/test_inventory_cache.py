"""Inventories read through the real ansible-inventory with its answers cached: a hit is the same Inventory, any edit
is a miss, what cannot be hashed is never cached, and a bad inventory still fails with its line."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fabricproof import cache as store
from fabricproof import inventory

from .helpers import H100_BASELINE, run, write_facts

INVENTORY = "all:\n  children:\n    gpu:\n      hosts:\n        h1: {ansible_host: 127.0.0.2}\n        h2: {}\n"
PLANTED = "planted-by-the-test"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("ANSIBLE_CONFIG", str(tmp_path / "ansible.cfg"))
    monkeypatch.delenv("FABRICPROOF_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "fabricproof" / "inventory"


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    (tmp_path / "inv" / "group_vars").mkdir(parents=True)
    (tmp_path / "inv" / "host_vars").mkdir()
    (tmp_path / "inv" / "inventory.yml").write_text(INVENTORY)
    (tmp_path / "inv" / "group_vars" / "gpu.yml").write_text("x: 1\n")
    (tmp_path / "inv" / "host_vars" / "h1.yml").write_text("y: 2\n")
    return tmp_path / "inv" / "inventory.yml"


def _plant(cache: Path) -> None:
    """Add a host to every entry: a load that shows it answered from the cache, not from ansible-inventory."""
    for entry in cache.glob("*.json"):
        data = json.loads(entry.read_text())
        data["all"].setdefault("hosts", []).append(PLANTED)
        entry.write_text(json.dumps(data))


def _hit(inv: Path) -> bool:
    return PLANTED in inventory.load(str(inv)).hosts


def test_a_hit_is_the_same_inventory_as_ansible_gives(inv: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICPROOF_NO_CACHE", "1")
    uncached = inventory.load(str(inv))
    assert not cache.exists()
    monkeypatch.delenv("FABRICPROOF_NO_CACHE")
    assert inventory.load(str(inv)) == uncached  # the miss that fills it
    assert inventory.load(str(inv)) == uncached  # the hit
    assert uncached.hosts["h1"].vars == {"ansible_host": "127.0.0.2", "x": 1, "y": 2}
    [entry] = cache.iterdir()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700 and stat.S_IMODE(entry.stat().st_mode) == 0o600
    _plant(cache)
    assert _hit(inv)


def test_every_edit_is_a_miss(inv: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inventory, a group_vars file, a host_vars file, ansible.cfg, an ANSIBLE_ variable: each edit in turn
    makes ansible-inventory answer again (the planted host gone), and that answer is kept (hit again)."""
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    inventory.load(str(inv))
    edits = {"inventory": lambda: inv.write_text(INVENTORY + "        h3: {}\n"),
             "group_vars": lambda: (inv.parent / "group_vars" / "gpu.yml").write_text("x: 3\n"),
             "host_vars": lambda: (inv.parent / "host_vars" / "h1.yml").write_text("y: 3\n"),
             "ansible.cfg": lambda: (tmp_path / "ansible.cfg").write_text("[defaults]\nforks = 7\n"),
             "ANSIBLE_ variable": lambda: monkeypatch.setenv("ANSIBLE_INVENTORY_ENABLED", "yaml,ini")}
    for n, (what, edit) in enumerate(edits.items(), start=2):
        _plant(cache)
        assert _hit(inv), what
        edit()
        assert not _hit(inv), f"{what} edited, yet the cached answer was used"
        assert len(list(cache.glob("*.json"))) == n
    assert inventory.load(str(inv)).hosts["h1"].vars["y"] == 3


def test_a_corrupt_entry_is_a_miss(inv: Path, cache: Path) -> None:
    first = inventory.load(str(inv))
    [entry] = cache.iterdir()
    entry.write_text('{"_meta": {"hostvars": ')
    assert inventory.load(str(inv)) == first
    assert json.loads(entry.read_text())["_meta"]["hostvars"]["h1"]["y"] == 2  # written anew


def test_a_script_inventory_and_a_plugin_config_are_never_cached(tmp_path: Path, cache: Path) -> None:
    script = tmp_path / "inv.py"
    script.write_text('#!/bin/sh\necho \'{"gpu": {"hosts": ["h1"]}, "_meta": {"hostvars": {}}}\'\n')
    script.chmod(0o755)
    assert sorted(inventory.load(str(script)).hosts) == ["h1"]
    plugin = tmp_path / "inv.yml"  # a plugin config: its hosts come from the plugin, not from these bytes
    plugin.write_text("plugin: ansible.builtin.generator\nhosts:\n  name: 'g{{ n }}'\nlayers:\n  n: ['1', '2']\n")
    assert sorted(inventory.load(str(plugin)).hosts) == ["g1", "g2"]
    static = tmp_path / "static.yml"
    static.write_text(INVENTORY)
    inventory.load(str(static))
    assert len(list(cache.iterdir())) == 1  # the static inventory's answer alone


def test_a_rejected_inventory_still_names_its_line_and_is_not_cached(tmp_path: Path, cache: Path) -> None:
    write_facts(tmp_path / "facts")
    bad = tmp_path / "inv.yml"
    bad.write_text("all:\n  hosts:\n    a: {ansible_host: 10.0.0.1\n")
    for _ in range(2):
        res = run("validate", "--facts", tmp_path / "facts", "--baseline", H100_BASELINE, "-i", bad)
        assert res.exit_code == 2
        assert f"{bad}:4: Ansible cannot parse it (auto plugin): YAML parsing failed" in res.stderr
    bad.write_text("all:\n  hosts:\n    a: {ansible_host: 10.0.0.1}\n")
    assert sorted(inventory.load(str(bad)).hosts) == ["a"]
    assert len(list(cache.iterdir())) == 1  # the fixed inventory's answer alone: the failures were not kept


def _waits_on(pid: int, lock: Path) -> bool:
    """True while process `pid` waits for the flock of `lock` (a `->` line of /proc/locks on its inode)."""
    ino = os.stat(lock).st_ino
    return any(line.split()[1] == "->" and line.split()[5] == str(pid) and line.split()[6].endswith(f":{ino}")
               for line in Path("/proc/locks").read_text().splitlines() if len(line.split()) > 6)


def test_a_process_missing_while_another_asks_ansible_waits_and_reads_its_answer(inv: Path, cache: Path) -> None:
    """srun's tasks or slurmd's health checks start together: one asks ansible-inventory, the others wait for its
    answer rather than each paying Ansible. Here the test holds the entry's lock as the asking process would, and
    the process started meanwhile waits on it and then answers from what was kept (the planted host)."""
    inventory.load(str(inv))
    [entry] = cache.glob("*.json")
    kept = entry.read_text()
    entry.unlink()
    name = entry.name.removesuffix(".json")
    with store.alone(cache, name):
        child = subprocess.Popen([sys.executable, "-c", "import sys; from fabricproof import inventory; "
                                  "print(*inventory.load(sys.argv[1]).hosts)", str(inv)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            for _ in range(1200):  # up to 2 minutes for Python to start and reach the lock on a loaded machine
                if _waits_on(child.pid, cache / f".{name}.lock") or child.poll() is not None:
                    break
                time.sleep(0.1)
            assert child.poll() is None, "the second process asked Ansible rather than wait for the first"
            assert _waits_on(child.pid, cache / f".{name}.lock")
            store.keep(cache, name, kept)  # what the asking process keeps
            _plant(cache)
        except BaseException:
            child.kill()
            child.wait()
            raise
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and PLANTED in out.split()
    assert [p.name for p in cache.iterdir()] == [entry.name]  # no lock file left behind


def test_a_copy_of_the_tree_elsewhere_is_a_hit_and_ansible_answers_it_alike(inv: Path, cache: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests (and operators' checkouts) hold the same inventory at several paths: one entry answers them all, which
    holds because Ansible's own answer does not depend on where the tree lies, templates naming it included."""
    (inv.parent / "group_vars" / "all.yml").write_text('where: "{{ inventory_dir }}/{{ inventory_file }}"\n')
    copy = tmp_path / "copy" / "of" / "inv"
    shutil.copytree(inv.parent, copy)
    monkeypatch.setenv("FABRICPROOF_NO_CACHE", "1")
    assert inventory.load(str(copy / inv.name)).hosts == inventory.load(str(inv)).hosts  # Ansible's answers
    monkeypatch.delenv("FABRICPROOF_NO_CACHE")
    first = inventory.load(str(inv))
    _plant(cache)
    assert _hit(copy / inv.name) and len(list(cache.glob("*.json"))) == 1
    assert first.hosts["h1"].vars["where"] == "{{ inventory_dir }}/{{ inventory_file }}"
