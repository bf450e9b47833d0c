"""The cabling plan (`kind: FabricPlan`): explicit cables, NDT CSV files and a rail-optimised rule, as one cable list."""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import documents
from ..errors import InputError, Problem
from .names import host_of

TIERS = ("leaf", "spine", "core")


@dataclass(frozen=True, slots=True)
class PlanEnd:
    """One end of a planned cable: a node description, a switch's short name or a GUID, and the port."""

    device: str
    port: int

    def __str__(self) -> str:
        return f"{self.device} port {self.port}"


@dataclass(frozen=True, slots=True)
class PlannedLink:
    """One planned cable; width and speed None where the plan does not say. `where` is "plan.yaml:14"."""

    a: PlanEnd
    b: PlanEnd
    width: str | None
    speed: str | None
    where: str


@dataclass(frozen=True, slots=True)
class Role:
    """Where a switch stands: its tier, scalable unit and the rail a leaf carries (None when unknown)."""

    tier: str
    su: str | None = None
    rail: int | None = None


@dataclass(frozen=True)
class Plan:
    name: str
    links: list[PlannedLink]
    source: str = ""
    #: roles the plan states (`switches:`, the rails rule), by switch short name as written
    declared: dict[str, Role] = field(default_factory=dict)
    #: HCA name -> rail, from the rails rule
    hca_rails: dict[str, int] = field(default_factory=dict)

    def rail_of(self, hca: str) -> int | None:
        """The rail of an HCA by name: the rails rule's, else the number ending the name (mlx5_3 -> 3)."""
        if hca in self.hca_rails:
            return self.hca_rails[hca]
        m = re.search(r"_(\d+)$", hca)
        return int(m.group(1)) if m else None

    def roles(self) -> dict[str, Role]:
        """Every switch the plan names, by short name: its stated role, else its tier from the cables (a switch
        cabled to a host is a leaf, one cabled to a leaf a spine, the rest core), a leaf's rail when all its HCAs
        are of one rail, and its scalable unit: leaves cabled to the same hosts are one, numbered from 1 in plan
        order."""
        neighbours: dict[str, set[str]] = {}
        hcas: dict[str, set[str]] = {}
        hosts: dict[str, set[str]] = {}
        for link in self.links:
            for one, other in ((link.a.device, link.b.device), (link.b.device, link.a.device)):
                if host_of(one) is None:
                    neighbours.setdefault(one, set())
                    named = host_of(other)
                    if named is not None:
                        hosts.setdefault(one, set()).add(named[0].lower())
                        hcas.setdefault(one, set()).add(named[1])
                    else:
                        neighbours[one].add(other)
        units: dict[frozenset[str], str] = {}
        out: dict[str, Role] = {}
        for name in neighbours:
            if name in self.declared:
                out[name] = self.declared[name]
            elif name in hcas:
                rails = {self.rail_of(h) for h in hcas[name]}
                su = units.setdefault(frozenset(hosts[name]), str(len(units) + 1))
                out[name] = Role("leaf", su, rails.pop() if len(rails) == 1 else None)
        for name, near in neighbours.items():
            if name not in out:
                out[name] = Role("spine" if any(out.get(n, Role("core")).tier == "leaf" for n in near) else "core")
        return out


# -- CSV (NVIDIA UFM NDT files: "#StartDevice,StartPort,EndDevice,EndPort,LinkType")

CSV_COLUMNS = ("StartDevice", "StartPort", "EndDevice", "EndPort")
_PORT = re.compile(r"(?:port\s*)?(\d+)", re.I)
_BLADE = re.compile(r"blade\s*(\d+)_port\s*(\d+)/(\d+)", re.I)


def _csv_end(device: str, port: str) -> PlanEnd | str:
    """A CSV end, or why it cannot be one. Ports read "Port 21", "21", a director's "Blade 16_Port 2/20" (blade 16,
    ASIC 2, port 20: the node "<chassis>/L16/U2"), or an HCA's node description beginning with the device's name
    ("SAT111092710053 ibp11s0f0" on device SAT111092710053: that HCA's port 1)."""
    if m := _PORT.fullmatch(port):
        n = int(m.group(1))
        return PlanEnd(device, n) if 1 <= n <= 255 else f"port {port!r} is out of range (1-255)"
    if m := _BLADE.fullmatch(port):
        return PlanEnd(f"{device}/L{int(m.group(1)):02d}/U{int(m.group(2))}", int(m.group(3)))
    if port.lower().startswith(device.lower() + " ") and host_of(port) is not None:
        return PlanEnd(port, 1)
    return (f"port {port!r} of {device} is not 'Port N', 'Blade N_Port A/B' or an HCA description starting with "
            f"{device!r}")


def parse_csv(text: str, file: str, width: str | None = None, speed: str | None = None) -> list[PlannedLink]:
    """The cables of an NDT-style CSV; InputError naming the file and line of every row it cannot read."""
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise InputError(Problem("the CSV is empty: expected a header " + ",".join(CSV_COLUMNS), file, 1))
    header = [h.strip().lstrip("#").strip() for h in next(csv.reader([lines[0]]))]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise InputError(Problem(f"the header lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                 f"(it has {', '.join(header)}; expected {','.join(CSV_COLUMNS)}[,LinkType])",
                                 file, 1))
    col = [header.index(c) for c in CSV_COLUMNS]
    out: list[PlannedLink] = []
    problems: list[Problem] = []
    for lineno, row in enumerate(csv.reader(lines[1:]), start=2):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < len(header) - (1 if "LinkType" in header else 0):
            problems.append(Problem(f"{len(row)} fields, the header has {len(header)}", file, lineno))
            continue
        values = [row[i].strip() if i < len(row) else "" for i in col]
        if not all(values):
            problems.append(Problem(f"empty {CSV_COLUMNS[values.index('')]}", file, lineno))
            continue
        a, b = _csv_end(values[0], values[1]), _csv_end(values[2], values[3])
        bad = [e for e in (a, b) if isinstance(e, str)]
        if bad:
            problems.append(Problem("; ".join(bad), file, lineno))
        elif a == b:
            problems.append(Problem(f"a cable from {a} to itself", file, lineno))
        else:
            out.append(PlannedLink(a, b, width, speed, f"{file}:{lineno}"))  # type: ignore[arg-type]
        if len(problems) >= 20:
            break
    if problems:
        raise InputError(problems)
    return out


# -- the plan document

def _hosts(rails: Mapping[str, Any], groups: Mapping[str, Sequence[str]] | None, doc: documents.Document) -> list[str]:
    spec = rails["hosts"]
    if isinstance(spec, list):
        return list(spec)
    group = spec["group"]
    if groups is None:
        raise InputError(doc.problem(("rails", "hosts", "group"), f"the hosts of group {group!r} need the "
                                     "inventory: give it, or list the hosts"))
    if group not in groups:
        raise InputError(doc.problem(("rails", "hosts", "group"), f"no group {group!r} in the inventory"))
    return list(groups[group])


def _pattern(doc: documents.Document, path: tuple[str | int, ...], pattern: str, **values: Any) -> str:
    try:
        return pattern.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise InputError(doc.problem(path, f"pattern {pattern!r} cannot be filled (it may use "
                                     f"{', '.join('{' + k + '}' for k in values)}): {exc}")) from None


def expand_rails(doc: documents.Document, rails: Mapping[str, Any], groups: Mapping[str, Sequence[str]] | None,
                 width: str | None, speed: str | None, where: str
                 ) -> tuple[list[PlannedLink], dict[str, Role], dict[str, int]]:
    """The rails rule as cables: HCA rail r of host i of scalable unit u (from 1) on leaf pattern(su=u, rail=r) port
    i+1; leaf uplink k on port uplink_port+k, round-robin over the spines, each spine's ports taken in order."""
    hosts = _hosts(rails, groups, doc)
    size = rails["su_size"]
    hcas = rails.get("hcas") or [f"mlx5_{r}" for r in range(rails.get("count", 8))]
    hca_port = rails.get("hca_port", 1)
    first_uplink = rails.get("uplink_port", size + 1)
    if first_uplink <= size:
        raise InputError(doc.problem(("rails", "uplink_port"), f"uplink port {first_uplink} is a host port (hosts "
                                     f"take ports 1-{size})"))
    spec = rails["spines"]
    spines = (list(spec) if isinstance(spec, list)
              else [_pattern(doc, ("rails", "spines", "name"), spec["name"], n=n) for n in range(1, spec["count"] + 1)])
    w, s = rails.get("width", width), rails.get("speed", speed)
    links: list[PlannedLink] = []
    roles: dict[str, Role] = {}
    leaves: list[str] = []
    for i, host in enumerate(hosts):
        su = i // size + 1
        for rail, hca in enumerate(hcas):
            leaf = _pattern(doc, ("rails", "leaf"), rails["leaf"], su=su, rail=rail)
            if leaf not in roles:
                roles[leaf] = Role("leaf", str(su), rail)
                leaves.append(leaf)
            elif roles[leaf] != Role("leaf", str(su), rail):
                raise InputError(doc.problem(("rails", "leaf"), f"pattern {rails['leaf']!r} gives {leaf!r} to two "
                                             "leaves: use both {su} and {rail}"))
            links.append(PlannedLink(PlanEnd(f"{host} {hca}", hca_port), PlanEnd(leaf, i % size + 1), w, s, where))
    spine_port = dict.fromkeys(spines, 0)
    n = 0
    for leaf in leaves:
        for k in range(rails["uplinks"]):
            spine = spines[n % len(spines)]
            n += 1
            spine_port[spine] += 1
            links.append(PlannedLink(PlanEnd(leaf, first_uplink + k), PlanEnd(spine, spine_port[spine]), w, s, where))
    for spine in spines:
        roles.setdefault(spine, Role("spine"))
    return links, roles, {hca: rail for rail, hca in enumerate(hcas)}


def from_document(doc: documents.Document, groups: Mapping[str, Sequence[str]] | None = None,
                  lines: bool = True) -> Plan:
    """The plan in a document. Each cable's `where` is its file and line, or with `lines` False (a JSON plan, whose
    lines cost a second parse) its file and JSON path."""
    documents.validate(doc, "fabricplan")

    def where(path: tuple[str | int, ...]) -> str:
        return f"{doc.file}:{doc.line(path)}" if lines else f"{doc.file} {documents.pointer(path)}"

    data = doc.data
    defaults = data.get("defaults") or {}
    width, speed = defaults.get("width"), defaults.get("speed")
    links: list[PlannedLink] = []
    for i, item in enumerate(data.get("links") or ()):
        a, b = PlanEnd(item["a"], item["a_port"]), PlanEnd(item["b"], item["b_port"])
        if a == b:
            raise InputError(doc.problem(("links", i), f"a cable from {a} to itself"))
        links.append(PlannedLink(a, b, item.get("width", width), item.get("speed", speed),
                                 where(("links", i))))
    base = Path(doc.file).parent
    for i, name in enumerate(data.get("include") or ()):
        path = base / name
        try:
            text = documents.read_text(path)
        except InputError as exc:
            raise InputError(doc.problem(("include", i), f"{name}: {exc.problems[0].message}")) from None
        links.extend(parse_csv(text, str(path), width, speed))
    declared = {name: Role(r["tier"], r.get("su"), r.get("rail")) for name, r in (data.get("switches") or {}).items()}
    hca_rails: dict[str, int] = {}
    if "rails" in data:
        more, roles, hca_rails = expand_rails(doc, data["rails"], groups, width, speed, where(("rails",)))
        links.extend(more)
        declared = {**roles, **declared}
    return Plan(data["name"], _once(links), doc.file, declared, hca_rails)


def _key(end: PlanEnd) -> tuple[str, int]:
    return end.device.lower(), end.port


def _problem(link: PlannedLink, message: str) -> Problem:
    """A problem placed where the cable is written: file and line, or a JSON plan's file and path."""
    file, _, line = link.where.rpartition(":")
    if line.isdigit():
        return Problem(message, file, int(line))
    file, pointer = link.where.rsplit(" ", 1)
    return Problem(message, file, None, pointer)


def _once(links: Sequence[PlannedLink]) -> list[PlannedLink]:
    """Each cable once: a port takes one cable, so a plan giving one port two cables is wrong, whichever part of it
    says so; the same cable written again (NDT files list some from both ends) is kept at its first place."""
    seen: dict[tuple[str, int], PlannedLink] = {}
    out: list[PlannedLink] = []
    problems: list[Problem] = []
    for link in links:
        first = seen.get(_key(link.a))
        if first is not None and {_key(first.a), _key(first.b)} == {_key(link.a), _key(link.b)}:
            if (first.width, first.speed) != (link.width, link.speed):
                problems.append(_problem(link, f"the cable {link.a} to {link.b} is planned at {link.width or 'any'} "
                                         f"{link.speed or 'any'} here and at {first.width or 'any'} "
                                         f"{first.speed or 'any'} at {first.where}"))
            continue
        out.append(link)
        for end in (link.a, link.b):
            key = _key(end)
            if key in seen:
                problems.append(_problem(link, f"{end} is planned twice (also at {seen[key].where})"))
            seen.setdefault(key, link)
        if len(problems) >= 20:
            break
    if problems:
        raise InputError(problems)
    return out


#: A plan lists every cable: a 2,000-host fabric's (25,088 cables) holds 225,807 values, past the 200,000 that bound
#: other documents; this bound still refuses an alias bomb before it expands.
MAX_PLAN_VALUES = 2_000_000


def load_plan(path: Path | str, *, groups: Mapping[str, Sequence[str]] | None = None) -> Plan:
    """Load and validate a fabric plan (YAML or JSON); InputError (exit 2) names file:line and JSON path. `groups`
    (inventory group -> hosts in order) serves a rails rule that names a group."""
    path = Path(path)
    if path.suffix.lower() == ".json":  # msgspec reads a 25,000-cable plan in ~0.1 s; YAML's line-keeping parse ~4 s
        return from_document(documents.load_json(path), groups, lines=False)
    return from_document(documents.load_yaml(path, MAX_PLAN_VALUES), groups)
