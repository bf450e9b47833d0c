"""Ansible inventories as the one source of hosts: read through `ansible-inventory --list`, limit with host patterns."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cache as cache_store
from . import invcache, toolpath
from .errors import InputError, Problem
from .model import Host
from .redact import assignments


@dataclass(frozen=True)
class Inventory:
    source: str
    hosts: Mapping[str, Host]
    groups: Mapping[str, tuple[str, ...]]  # group -> hosts (transitive)

    def groups_of(self) -> dict[str, tuple[str, ...]]:
        return {h.name: h.groups for h in self.hosts.values()}


def from_list_json(data: Mapping[str, Any], source: str = "") -> Inventory:
    """Build an Inventory from the JSON `ansible-inventory --list` prints (pure)."""
    hostvars = (data.get("_meta") or {}).get("hostvars") or {}
    direct: dict[str, set[str]] = {}
    children: dict[str, list[str]] = {}
    for name, body in data.items():
        if name == "_meta" or not isinstance(body, dict):
            continue
        direct[name] = set(body.get("hosts") or ())
        children[name] = list(body.get("children") or ())
    for kids in list(children.values()):  # a group without hosts is named only as a child: it exists, empty
        for kid in kids:
            direct.setdefault(kid, set())

    memo: dict[str, set[str]] = {}

    def members(group: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if group in memo:
            return memo[group]
        if group in seen:  # Ansible refuses cycles; be defensive rather than recurse forever
            return set()
        out = set(direct.get(group, ()))
        for child in children.get(group, ()):
            out |= members(child, seen | {group})
        memo[group] = out
        return out

    groups = {g: tuple(sorted(members(g))) for g in direct}
    all_hosts = set(hostvars) | {h for hs in groups.values() for h in hs}
    host_groups: dict[str, list[str]] = {h: [] for h in all_hosts}
    for g, hs in groups.items():
        if g in ("all", "ungrouped"):
            continue
        for h in hs:
            host_groups[h].append(g)
    hosts = {h: Host(h, dict(hostvars.get(h) or {}), tuple(sorted(host_groups[h]))) for h in sorted(all_hosts)}
    groups.setdefault("all", tuple(sorted(all_hosts)))
    return Inventory(source, hosts, groups)


def load(path: str | Path) -> Inventory:
    """Read any inventory Ansible accepts (YAML, INI, directory with group_vars, scripts)."""
    src = str(path)
    if not Path(src).exists():
        raise InputError(Problem("inventory not found", src))
    _check_readable(Path(src))
    exe = toolpath.find("ansible-inventory")
    if exe is None:
        raise InputError("ansible-inventory not found on PATH: install ansible-core (pip install ansible-core)")
    env = dict(os.environ)
    # Fail loudly instead of Ansible's default of warning and returning an empty inventory.
    env.update(ANSIBLE_INVENTORY_UNPARSED_FAILED="True", ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="True",
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="False")
    data = _listed(src, exe, env)
    inv = from_list_json(data, src)
    if not inv.hosts:
        raise InputError(Problem("the inventory has no hosts", src))
    return inv


def _listed(src: str, exe: str, env: dict[str, str]) -> dict[str, Any]:
    """`ansible-inventory --list`'s JSON, from the cache when the same inputs were listed before (about 0.75 s of
    CPU saved a process, nearly all Ansible's import). Only a successful answer is kept: errors run every time."""
    cache = None if invcache.disabled(env) else invcache.directory(env)
    name = _cache_key(cache, src, exe, env)
    if cache is None or name is None:
        return _asked(src, exe, env, None, None)
    if (hit := cache_store.load(cache, name)) is not None:
        return hit
    # Processes started together (srun's tasks, slurmd's health checks at one tick, a test's CLI runs) would each
    # pay Ansible for the one answer: the first asks, the others wait for it and read what it kept.
    with cache_store.alone(cache, name):
        if (hit := cache_store.load(cache, name)) is not None:
            return hit
        return _asked(src, exe, env, cache, name)


def _asked(src: str, exe: str, env: dict[str, str], cache: Path | None, name: str | None) -> dict[str, Any]:
    """ansible-inventory's answer, kept under `name` in `cache` (if given) when it succeeds."""
    proc = subprocess.run([exe, "-i", src, "--list"], capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise InputError(ansible_problem(proc.stderr, src))
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise InputError(Problem(f"ansible-inventory printed no JSON: {exc}", src)) from None
    if not isinstance(data, dict):
        raise InputError(Problem("ansible-inventory printed JSON that is not an inventory", src))
    # Kept only when the inputs hashed the same after Ansible read them: an edit meanwhile must not file the new
    # answer under the old content's key.
    if cache is not None and name is not None and _cache_key(cache, src, exe, env) == name:
        cache_store.keep(cache, name, proc.stdout, most=invcache.KEEP)
    return data


def _cache_key(cache: Path | None, src: str, exe: str, env: Mapping[str, str]) -> str | None:
    files = invcache.inputs(Path(src)) if cache is not None else None
    return invcache.key(src, files, exe, env) if files is not None else None


def _check_readable(src: Path) -> None:
    """Ansible says "Completely failed to parse" of a file it may not read: say what is wrong instead."""
    files = [src] if not src.is_dir() else [p for p in sorted(src.rglob("*")) if p.is_file()]
    for f in files:
        try:
            with open(f, "rb"):
                pass
        except PermissionError:
            raise InputError(Problem("cannot read the inventory: permission denied", str(f))) from None


#: "[WARNING]: Failed to parse inventory with 'auto' plugin: <reason>", one per plugin Ansible tried.
_PLUGIN_FAILED = re.compile(r"Failed to parse inventory with '([\w.]+)' plugin: (.+)")
#: "Origin: /path/inventory.yml:4:1": where in the file the reason points.
_ORIGIN = re.compile(r"^Origin: (.+?):(\d+)(?::\d+)?$", re.MULTILINE)
#: The plugins whose reason matters most, by file kind: YAML files fail the yaml/auto plugins for their real
#: reason and the ini plugin only because they are not INI.
_PREFERRED = {".yml": ("auto", "yaml"), ".yaml": ("auto", "yaml"), ".json": ("auto", "yaml"), "": ("ini",)}


def ansible_problem(stderr: str, src: str) -> Problem:
    """Ansible's own reason for rejecting an inventory, with the line it names (secret-looking values masked)."""
    reasons = {m[1]: re.sub(r"\s+", " ", m[2]).strip() for m in _PLUGIN_FAILED.finditer(stderr)}
    origin = next((m for m in _ORIGIN.finditer(stderr) if Path(m[1]).name == Path(src).name), None)
    line = int(origin[2]) if origin else None
    if reasons:
        order = _PREFERRED.get(Path(src).suffix.lower(), ("ini",))
        plugin = next((p for p in order if p in reasons), next(iter(reasons)))
        return Problem(assignments(f"Ansible cannot parse it ({plugin} plugin): {reasons[plugin]}"[:600]), src, line)
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("[WARNING]: Skipping")]
    errs = [ln for ln in lines if "ERROR" in ln or "error" in ln.lower()]
    text = " ".join((errs or lines)[:4]) or "ansible-inventory failed"
    return Problem(assignments(re.sub(r"\s+", " ", text)[:600]), src, line)


def _term_hosts(inv: Inventory, term: str) -> set[str]:
    if term in ("all", "*"):
        return set(inv.hosts)
    if term.startswith("~"):
        rx = re.compile(term[1:])
        return {h for h in inv.hosts if rx.match(h)} | {h for g, hs in inv.groups.items() if rx.match(g) for h in hs}
    if term in inv.groups:
        return set(inv.groups[term])
    if term in inv.hosts:
        return {term}
    if any(c in term for c in "*?["):
        return {h for h in inv.hosts if fnmatch.fnmatchcase(h, term)} | {
            h for g, hs in inv.groups.items() if fnmatch.fnmatchcase(g, term) for h in hs
        }
    return set()


def limit(inv: Inventory, pattern: str | None) -> list[str]:
    """Hosts matching an Ansible host pattern: 'a:b' or 'a,b' union, ':&x' intersection, ':!x' exclusion, globs, ~regex."""
    if not pattern:
        return sorted(inv.hosts)
    terms = [t.strip() for t in re.split(r"[:,]", pattern) if t.strip()]
    union: set[str] = set()
    inter: list[set[str]] = []
    exclude: set[str] = set()
    unknown: list[str] = []
    for term in terms:
        kind, name = (term[0], term[1:]) if term[0] in "&!" else ("", term)
        try:
            hosts = _term_hosts(inv, name)
        except re.error as exc:
            raise InputError(f"--limit {pattern!r}: {name!r} is not a valid regular expression ({exc}); a '~' "
                             "term is a Python regex matched from the start of host and group names") from None
        if not hosts and not any(c in name for c in "*?[~"):
            unknown.append(name)
        if kind == "&":
            inter.append(hosts)
        elif kind == "!":
            exclude |= hosts
        else:
            union |= hosts
    if unknown and not union and not inter:
        raise InputError(f"--limit {pattern!r}: no host or group named {', '.join(unknown)} in the inventory")
    if not any(t[0] not in "&!" for t in terms):  # only restrictions given: start from all hosts, like Ansible
        union = set(inv.hosts)
    for s in inter:
        union &= s
    chosen = sorted(union - exclude)
    if not chosen:
        raise InputError(f"--limit {pattern!r} matches no host in the inventory")
    return chosen
