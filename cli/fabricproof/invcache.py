"""A content-keyed cache of `ansible-inventory --list`'s JSON, used only for inventories made of files it can hash."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator, Mapping
from importlib import metadata
from itertools import islice
from pathlib import Path
from typing import Any

from . import paths, toolpath

#: Bumped when what goes into the key or an entry changes, so older entries are never read as new ones.
FORMAT = b"fabricproof-inventory-cache/3"
#: Entries kept; each inventory edit makes a new one, and the oldest are removed past this.
KEEP = 32
#: An inventory tree larger than this is read by Ansible every time: hashing it would cost what the cache saves.
MAX_FILES = 2000
#: A YAML or JSON document with a `plugin:` key anywhere is taken for an inventory plugin config (Ansible's auto
#: plugin decides by the top-level key; matching it anywhere only costs a hit, never a stale answer).
_PLUGIN = re.compile(rb"""(?m)["']?\bplugin["']?\s*:""")
#: The variables directories Ansible reads beside an inventory file or inside an inventory directory.
_VARS_DIRS = ("group_vars", "host_vars")


def disabled(env: Mapping[str, str]) -> bool:
    return env.get("FABRICPROOF_NO_CACHE", "") not in ("", "0")


def directory(env: Mapping[str, str]) -> Path:
    """$XDG_CACHE_HOME/fabricproof/inventory (default ~/.cache/...); with neither (a daemon's run: slurmd's
    HealthCheckProgram, a systemd unit, cron give none), inventory/ in the state directory's cache."""
    base = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = env.get("HOME", "")
        if not os.path.isabs(home):
            return paths.state_dir(env) / paths.CACHE_DIR / "inventory"
        base = os.path.join(home, ".cache")
    return Path(base) / "fabricproof" / "inventory"


def _walk(top: Path, seen: set[str]) -> Iterator[Path]:
    """Every file below top but hidden ones (Ansible never reads a name starting with '.' in an inventory or vars
    directory), through links as Ansible follows them, each directory once (a link loop ends)."""
    real = os.path.realpath(top)
    if real in seen:
        return
    seen.add(real)
    for name in sorted(os.listdir(top)):
        if name.startswith("."):
            continue
        p = top / name
        if p.is_dir():
            yield from _walk(p, seen)
        else:
            yield p


def inputs(src: Path) -> list[Path] | None:
    """Every file `ansible-inventory -i src --list` answers from, or None when its answer may depend on more.

    Cacheable is a static inventory file (YAML, INI, JSON, TOML) or a directory of them, with the group_vars/ and
    host_vars/ Ansible reads beside a file or inside a directory: the answer is then a function of those bytes
    (and of the key's other parts). Not cacheable, because their answer depends on what no hash here sees: an
    executable file (Ansible runs it as an inventory script), a plugin config (`plugin:`, which asks a cloud, a
    CMDB or another file; refused by `key`, which reads the bytes), a vault-encrypted value (its password), a
    vars_plugins/ directory (code), or a tree too large to hash cheaply."""
    try:
        base = _base(src)
        if (base / "vars_plugins").exists():
            return None
        found = list(islice(_walk(src, set()), MAX_FILES + 1)) if src.is_dir() else [src]
        for d in _VARS_DIRS:  # a file named group_vars is read too (as group_vars.yml would be)
            if (base / d).is_dir():
                found += islice(_walk(base / d, set()), MAX_FILES + 1)
            elif (base / d).exists():
                found.append(base / d)
        every = sorted(set(found))
        if len(every) > MAX_FILES:
            return None
        for f in every:
            st = f.stat()
            if not stat.S_ISREG(st.st_mode) or (st.st_mode & 0o111 and not _in_vars(f, base)):
                return None
    except OSError:
        return None
    return every


def _base(src: Path) -> Path:
    """Where Ansible looks for group_vars/ and host_vars/: the inventory directory, or the file's own."""
    return src if src.is_dir() else src.parent


def _in_vars(f: Path, base: Path) -> bool:
    """A file of base's group_vars/ or host_vars/: read as variables, never run or taken for a plugin config."""
    return f.relative_to(base).parts[0] in _VARS_DIRS


def _config_files(env: Mapping[str, str]) -> list[str]:
    """Every ansible.cfg Ansible may use, in its order (the first that exists wins; all are hashed)."""
    named = env.get("ANSIBLE_CONFIG", "")
    if named and os.path.isdir(named):
        named = os.path.join(named, "ansible.cfg")
    home = os.path.join(env["HOME"], ".ansible.cfg") if env.get("HOME") else os.path.expanduser("~/.ansible.cfg")
    return [named, os.path.abspath("ansible.cfg"), home, "/etc/ansible/ansible.cfg"]


def key(src: str, files: list[Path], exe: str, env: Mapping[str, str]) -> str | None:
    """The hash naming an entry: every input file's path (from the inventory's directory: the answer is the same
    wherever the tree lies, `--list` leaves out inventory_dir and inventory_file and renders no template) and bytes,
    the inventory's own name, ansible-core's version, the ansible-inventory run (path and bytes), the ANSIBLE_* and
    PYTHON* environment (fabricproof's own settings are in it) and every ansible.cfg candidate's bytes. None when a
    part cannot be known without running Ansible."""
    if Path(exe).parent != toolpath.python_bindir():
        return None  # ansible-core's metadata here says nothing of the Ansible another interpreter runs
    try:
        version = metadata.version("ansible-core")
    except metadata.PackageNotFoundError:
        return None
    h = hashlib.sha256(FORMAT)

    def part(*values: str | bytes) -> None:
        for v in values:
            b = v if isinstance(v, bytes) else v.encode("utf-8", "surrogateescape")
            h.update(len(b).to_bytes(8, "big") + b)

    # The file's name picks Ansible's plugin (.yml, .ini, none); a directory reads every file in it.
    part("dir" if os.path.isdir(src) else "file", os.path.basename(os.path.abspath(src)), version, exe)
    try:
        base = _base(Path(src))
        part(Path(exe).read_bytes())
        for f in files:
            data = f.read_bytes()
            if b"$ANSIBLE_VAULT" in data or b"!vault" in data:
                return None
            if not _in_vars(f, base) and _PLUGIN.search(data):
                return None
            part(os.path.relpath(f, base), data)
        for name in sorted(k for k in env if k.startswith(("ANSIBLE_", "PYTHON")) or k == "HOME"):
            part(name, env[name])
        for cfg in _config_files(env):
            # A candidate that is not there adds only that: every working directory without an ansible.cfg gets the
            # same answer (a CLI run from a test's directory missed what the same inventory kept from the repository).
            if cfg and os.path.isfile(cfg):
                part("cfg", cfg, Path(cfg).read_bytes())
            else:
                part("no cfg")
    except OSError:
        return None
    return h.hexdigest()
