"""The fabric view: switches by tier, leaves by scalable unit and rail, cable bundles as counts, failing cables marked."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..collectors.textutil import natural_key
from ..fsutil import atomic_write_text
from ..subnet.model import End, Link, Node, Subnet
from ..subnet.names import is_aggregation_node, switch_name
from ..words import counted
from ._html import attr, e, page

#: Tiers top-down, as the page draws them.
TIERS = ("core", "spine", "leaf")
TIER_WORDS = {"core": "Cores", "spine": "Spines", "leaf": "Leaves"}
#: The finding kinds of the plan diff, in the order the summary counts them.
KINDS = ("miswired", "swapped", "missing", "down", "unplanned", "width", "speed", "rail", "duplicate", "counters", "sm")
#: Where a switch's cables go: to hosts (CAs), to a switch of a higher or a lower tier, or of its own.
DIRECTIONS = ("hosts", "up", "down", "side")
DIRECTION_WORDS = {"leaf": {"hosts": "hosts", "up": "uplinks", "down": "down", "side": "to leaves"},
                   "spine": {"hosts": "hosts", "up": "to cores", "down": "to leaves", "side": "to spines"},
                   "core": {"hosts": "hosts", "up": "up", "down": "to spines", "side": "to cores"}}
#: A box lists at most this many failing cables of its own (the list below holds every one): a leaf whose every
#: cable fails must not make the page as large as the fabric.
MAX_MARKS = 8
#: The list below the picture stops here, saying how many more there are (the report's JSON holds them all).
MAX_LISTED = 2000
MAX_HOSTS_NAMED = 10

_PORT = re.compile(r"^(.*\S) port (\d+)$")


class Finding(Protocol):
    """One failing cable (or fabric fact) as the plan diff reports it (subnet.diff.Finding)."""

    @property
    def check(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def ends(self) -> tuple[str, ...]: ...
    @property
    def hosts(self) -> tuple[str, ...]: ...
    @property
    def sentence(self) -> str: ...


class Role(Protocol):
    """A switch's place in the plan (subnet.plan.Role): tier leaf|spine|core, scalable unit, rail."""

    @property
    def tier(self) -> str: ...
    @property
    def su(self) -> str | None: ...
    @property
    def rail(self) -> int | None: ...


class PlanEnd(Protocol):
    @property
    def device(self) -> str: ...
    @property
    def port(self) -> int: ...


class PlannedLink(Protocol):
    @property
    def a(self) -> PlanEnd: ...
    @property
    def b(self) -> PlanEnd: ...


class Plan(Protocol):
    """What the view reads of a fabric plan (subnet.plan.Plan): its links, for the planned counts."""

    @property
    def links(self) -> Sequence[PlannedLink]: ...


@dataclass
class _Count:
    planned: int = 0
    up: int = 0
    failing: int = 0


@dataclass
class _Box:
    """One switch as drawn: seen in the fabric (guid) or planned and never seen (guid None)."""

    key: str
    name: str
    desc: str
    guid: str | None
    tier: str
    su: str | None
    rail: int | None
    counts: dict[str, _Count] = field(default_factory=dict)
    marks: list[tuple[int, str]] = field(default_factory=list)  # (finding index, ports on this switch)

    def count(self, direction: str) -> _Count:
        return self.counts.setdefault(direction, _Count())


@dataclass
class _Fabric:
    boxes: dict[str, _Box]
    by_name: dict[str, list[str]]  # short name, full description or GUID -> box keys
    bundles: dict[tuple[str, str, str], _Count]  # (lower tier, lower group, upper box key) -> cables
    bundle_marks: dict[tuple[str, str, str], list[int]]
    where: list[list[str]]  # per finding: the box keys it marks
    planned: bool
    cables: int


_RANK = {"leaf": 0, "spine": 1, "core": 2}


def _tier_rank(tier: str) -> int:
    return _RANK.get(tier, 0)


def _cables(subnet: Subnet) -> list[Link]:
    """The links that are cables: all but a switch's link to its own aggregation node."""
    nodes = subnet.nodes
    return [lk for lk in subnet.links if not (is_aggregation_node(nodes.get(lk.a.guid)) or is_aggregation_node(nodes.get(lk.b.guid)))]


def _derived_tiers(subnet: Subnet, cables: Iterable[Link]) -> dict[str, str]:
    """Each switch's tier from the cabling alone: a switch with hosts' CAs attached is a leaf, one cabled to a leaf a
    spine, the rest cores. A switch cabled to nothing is drawn as a leaf (nothing tells more)."""
    nodes = subnet.nodes
    near: dict[str, set[str]] = {n.guid: set() for n in subnet.switches()}
    leaves: set[str] = set()
    for lk in cables:
        a, b = nodes.get(lk.a.guid), nodes.get(lk.b.guid)
        if a is None or b is None:
            continue
        if a.kind == "switch" and b.kind == "switch":
            near[a.guid].add(b.guid)
            near[b.guid].add(a.guid)
        elif a.kind == "switch":
            leaves.add(a.guid)
        elif b.kind == "switch":
            leaves.add(b.guid)
    out = {g: "leaf" for g in leaves}
    out.update({g: "spine" for leaf in leaves for g in near[leaf] if g not in out})
    out.update({g: "leaf" if not near[g] else "core" for g in near if g not in out})
    return out


def _boxes(subnet: Subnet, roles: Mapping[str, Role],
           cables: Iterable[Link]) -> tuple[dict[str, _Box], dict[str, list[str]]]:
    derived = _derived_tiers(subnet, cables)
    boxes: dict[str, _Box] = {}
    by_name: dict[str, list[str]] = {}
    for node in subnet.switches():
        name = switch_name(node.desc)
        role = roles.get(name) or roles.get(node.desc) or roles.get(node.guid)  # as the plan spelt the switch
        tier = role.tier if role is not None and role.tier in TIERS else derived.get(node.guid, "leaf")
        boxes[node.guid] = _Box(node.guid, name, node.desc, node.guid, tier, role.su if role else None,
                                role.rail if role else None)
        for alias in dict.fromkeys((name, node.desc, node.guid)):
            by_name.setdefault(alias, []).append(node.guid)
    for name, role in roles.items():
        if name not in by_name:  # planned, never seen: drawn so a whole missing switch shows
            key = f"planned:{name}"
            boxes[key] = _Box(key, name, name, None, role.tier if role.tier in TIERS else "leaf", role.su, role.rail)
            by_name[name] = [key]
    return boxes, by_name


def _direction(box: _Box, other: _Box | None) -> str:
    if other is None:
        return "hosts"
    lo, hi = _tier_rank(box.tier), _tier_rank(other.tier)
    return "up" if hi > lo else "down" if hi < lo else "side"


def _group(box: _Box) -> str:
    return box.su or ""


def _bundle_key(a: _Box, b: _Box) -> tuple[str, str, str] | None:
    """A switch-to-switch cable's bundle: the lower switch's tier and scalable unit, and the upper switch."""
    if _tier_rank(a.tier) == _tier_rank(b.tier):
        return None
    lo, hi = (a, b) if _tier_rank(a.tier) < _tier_rank(b.tier) else (b, a)
    return lo.tier, _group(lo), hi.key


def _resolve(device: str, by_name: Mapping[str, list[str]]) -> list[str]:
    """The boxes a device name means: a switch's short name, its description or GUID; [] for a CA or a stranger."""
    return by_name.get(device) or by_name.get(switch_name(device)) or by_name.get(device.lower()) or []


def _layout(subnet: Subnet, findings: Sequence[Finding], roles: Mapping[str, Role], plan: Plan | None) -> _Fabric:
    cables = _cables(subnet)
    boxes, by_name = _boxes(subnet, roles, cables)
    fabric = _Fabric(boxes, by_name, {}, {}, [], plan is not None, len(cables))
    for lk in cables:
        _tally(fabric, boxes.get(lk.a.guid), boxes.get(lk.b.guid), "up")
    planned_far: dict[tuple[str, int], _Box | None] = {}  # a switch port -> the planned far end's switch (None: a CA)
    for pl in (plan.links if plan is not None else ()):
        ka, kb = _resolve(pl.a.device, by_name)[:1], _resolve(pl.b.device, by_name)[:1]
        a, b = (boxes[ka[0]] if ka else None), (boxes[kb[0]] if kb else None)
        _tally(fabric, a, b, "planned")
        if a is not None:
            planned_far[(a.key, pl.a.port)] = b
        if b is not None:
            planned_far[(b.key, pl.b.port)] = a
    cas = {desc: [n for n in same if n.kind != "switch"] for desc, same in subnet.by_desc().items()}
    for i, f in enumerate(findings):
        ports, host_side = _marked(subnet, f, by_name, cas)
        fabric.where.append(list(ports))
        for k, at in ports.items():
            box = boxes[k]
            others = [boxes[o] for o in ports if o != k]
            other: _Box | None = None
            if host_side:
                direction = "hosts"
            elif others:
                other = max(others, key=lambda o: abs(_tier_rank(o.tier) - _tier_rank(box.tier)))
                direction = _direction(box, other)
            else:  # one switch port named alone (its counters grow): the cable in it, or the plan's, says where to
                other, direction = _far(subnet, boxes, box, at, planned_far)
            box.count(direction).failing += 1
            box.marks.append((i, ", ".join(f"p{p}" for p in dict.fromkeys(at))))
            if other is not None and (key := _bundle_key(box, other)) is not None:
                marks = fabric.bundle_marks.setdefault(key, [])
                if not marks or marks[-1] != i:  # a cable marks its bundle once, from whichever end
                    marks.append(i)
                fabric.bundles.setdefault(key, _Count()).failing = len(marks)
    return fabric


def _tally(fabric: _Fabric, a: _Box | None, b: _Box | None, what: str) -> None:
    """Count one cable (seen up, or planned) at both its switches and in its bundle; a CA end counts as hosts."""
    for box, other in ((a, b), (b, a)):
        if box is not None:
            c = box.count(_direction(box, other))
            setattr(c, what, getattr(c, what) + 1)
    if a is not None and b is not None and (key := _bundle_key(a, b)) is not None:
        c = fabric.bundles.setdefault(key, _Count())
        setattr(c, what, getattr(c, what) + 1)


def _marked(subnet: Subnet, f: Finding, by_name: Mapping[str, list[str]],
            cas: Mapping[str, list[Node]]) -> tuple[dict[str, list[int]], bool]:
    """The switches a finding marks, with their ports it names, and whether a host's cable is involved. A CA's port
    marks the switch it is cabled to (where the cable is to be moved from)."""
    ports: dict[str, list[int]] = {}
    host_side = False
    for end in f.ends:
        m = _PORT.match(end)
        device, port = (m.group(1), int(m.group(2))) if m else (end, None)
        keys = _resolve(device, by_name)
        for k in keys:
            ports.setdefault(k, []).extend([port] if port is not None else [])
        if keys:
            continue
        host_side = True  # a CA, or a device the fabric does not show
        node = subnet.nodes.get(device.lower())
        for ca in cas.get(device, []) + ([node] if node is not None and node.kind != "switch" else []):
            link = subnet.link_at(End(ca.guid, port)) if port is not None else None
            if link is not None and (far := link.other(End(ca.guid, port))).guid in by_name:
                ports.setdefault(far.guid, []).append(far.port)
    return ports, host_side


def _far(subnet: Subnet, boxes: Mapping[str, _Box], box: _Box, at: Iterable[int],
         planned_far: Mapping[tuple[str, int], _Box | None]) -> tuple[_Box | None, str]:
    """The switch at the far end of a switch port's cable (None: a CA) and the cable's direction: as seen, else as
    planned, else a leaf's port is taken for a host's and a spine's or core's for one from below."""
    for p in at:
        if box.guid is not None and (link := subnet.link_at(End(box.guid, p))) is not None:
            far = boxes.get(link.other(End(box.guid, p)).guid)
            return far, _direction(box, far)
        if (box.key, p) in planned_far:
            return planned_far[(box.key, p)], _direction(box, planned_far[(box.key, p)])
    return None, "hosts" if box.tier == "leaf" else "down"


# -- rendering ---------------------------------------------------------------------------------------------------------

CSS = """
section.fabric .fv-legend span{display:inline-block;margin-right:.9rem}
section.fabric .fv-legend i{display:inline-block;width:.9rem;height:.9rem;vertical-align:middle;margin-right:.25rem;
border:1px solid var(--line)}
section.fabric .boxes{display:flex;flex-wrap:wrap;gap:.35rem}
section.fabric .sw{border:1px solid var(--line);border-left:4px solid var(--pass);border-radius:3px;padding:.15rem .35rem;
font-size:11px;line-height:1.3;min-width:8.5rem;max-width:13rem;background:#fff}
section.fabric .sw b{display:block;font-family:ui-monospace,monospace;font-size:11.5px;overflow:hidden;
text-overflow:ellipsis;white-space:nowrap}
section.fabric .sw.fail{border-color:var(--fail);background:#fff5f5}
section.fabric .sw.absent{border-style:dashed;border-left-color:var(--unk);background:#fffbea}
section.fabric .sw .c{display:block;white-space:nowrap}
section.fabric .sw .c.short{color:#9a6700}section.fabric .sw .c.bad{color:var(--fail);font-weight:600}
section.fabric ul.marks{list-style:none;margin:.1rem 0 0;padding:0}
section.fabric li.cable{display:inline-block;margin:1px 2px 0 0}
section.fabric li.cable a,section.fabric .sw .more{display:inline-block;padding:0 .25rem;border-radius:2px;font-size:10px;
text-decoration:none}
section.fabric li.cable.fail a{background:var(--fail);color:#fff}
section.fabric .tier h4{margin:.5rem 0 .2rem;font-size:.9rem}
section.fabric .scroll{overflow-x:auto;max-width:100%}
section.fabric table.leaves{width:100%}
section.fabric table.leaves td,section.fabric table.leaves th{padding:.2rem;vertical-align:top}
section.fabric table.bundles td,section.fabric table.bundles th{padding:0 .2rem;font-size:10.5px;text-align:center;
min-width:1.6rem}
section.fabric table.bundles th.col{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:500;
font-family:ui-monospace,monospace;max-height:8rem;overflow:hidden}
section.fabric .b-ok{background:#dafbe1}section.fabric .b-short{background:#fff1c2}
section.fabric .b-fail{background:var(--fail);color:#fff;font-weight:600}
section.fabric table.fv-findings td{overflow-wrap:normal}
section.fabric table.fv-findings td:nth-child(-n+2),section.fabric table.fv-findings td:nth-child(4){white-space:nowrap}
section.fabric table.fv-findings td:last-child{min-width:24rem}
section.fabric tr.finding{scroll-margin-top:4rem}
"""

_LEGEND = (("b-ok", "bundle complete"), ("b-short", "fewer cables than planned, or more"),
           ("b-fail", "a failing cable in the bundle"))


def _sorted(boxes: Iterable[_Box]) -> list[_Box]:
    return sorted(boxes, key=lambda b: (natural_key(b.su or "\uffff"), natural_key(b.name), b.key))


def _summary(subnet: Subnet, fabric: _Fabric, findings: Sequence[Finding]) -> str:
    seen = [b for b in fabric.boxes.values() if b.guid is not None]
    tiers = Counter(b.tier for b in seen)
    by_tier = ", ".join(counted(tiers[t], t, "leaves" if t == "leaf" else None) for t in reversed(TIERS) if tiers[t])
    sharp = sum(1 for n in subnet.cas() if is_aggregation_node(n))
    cas = sum(1 for _ in subnet.cas()) - sharp
    kinds = Counter(f.kind for f in findings)
    order = [k for k in KINDS if kinds[k]] + sorted(k for k in kinds if k not in KINDS)
    failing = ("failing: " + ", ".join(f"{kinds[k]} {k}" for k in order)) if findings else "no failing cable"
    absent = sum(1 for b in fabric.boxes.values() if b.guid is None)
    parts = [f"{counted(len(seen), 'switch', 'switches')}" + (f" ({by_tier})" if by_tier else ""),
             f"{cas:,} CA{'s' * (cas != 1)}" + (f" (and {sharp:,} SHARP aggregation nodes)" if sharp else ""),
             f"{fabric.cables:,} cable{'s' * (fabric.cables != 1)} up"]
    if absent:
        parts.append(f"{counted(absent, 'planned switch', 'planned switches')} not seen")
    return " · ".join(parts) + " · " + failing


def _count_line(box: _Box, direction: str, c: _Count, planned: bool) -> str:
    word = DIRECTION_WORDS[box.tier][direction]
    text = f"{word} {c.up}/{c.planned} up" if planned else f"{word} {c.up} up"
    cls = "bad" if c.failing else "short" if planned and c.up != c.planned else ""
    if c.failing:
        text += f" · {c.failing} failing"
    return (f'<span class="{("c " + cls).strip()}" data-dir="{direction}" data-up="{c.up}"'
            + (f' data-planned="{c.planned}"' if planned else "") + f' data-failing="{c.failing}">{e(text)}</span>')


def _box(box: _Box, fabric: _Fabric, findings: Sequence[Finding]) -> str:
    cls = " fail" if box.marks else ""
    cls += " absent" if box.guid is None else ""
    tip = f"{box.desc} · {box.guid}" if box.guid else f"{box.name}: planned, not seen in the fabric"
    data = f" data-su={attr(box.su)}" if box.su is not None else ""
    data += f' data-rail="{box.rail}"' if box.rail is not None else ""
    lines = [_count_line(box, d, box.counts[d], fabric.planned) for d in DIRECTIONS if d in box.counts]
    marks = ""
    if box.marks:
        items = [f'<li class="cable fail k-{e(findings[i].kind)}" data-finding="{i}" title={attr(findings[i].sentence)}>'
                 f'<a href="#fab-f{i}">{e(p + " " if p else "")}{e(findings[i].kind)}</a></li>'
                 for i, p in box.marks[:MAX_MARKS]]
        if len(box.marks) > MAX_MARKS:
            items.append(f'<li class="more">+{len(box.marks) - MAX_MARKS} more below</li>')
        marks = f'<ul class="marks">{"".join(items)}</ul>'
    return (f'<div class="sw {box.tier}{cls}" data-switch={attr(box.name)} data-tier="{box.tier}"{data} '
            f'data-failing="{len(box.marks)}" title={attr(tip)}><b>{e(box.name)}</b>{"".join(lines)}{marks}</div>')


def _upper_tier(fabric: _Fabric, tier: str, findings: Sequence[Finding]) -> list[str]:
    boxes = _sorted(b for b in fabric.boxes.values() if b.tier == tier)
    if not boxes:
        return []
    groups: dict[str, list[_Box]] = {}
    for b in boxes:
        groups.setdefault(_group(b), []).append(b)
    out = [f'<div class="tier" data-tier="{tier}">', f"<h3>{TIER_WORDS[tier]} ({len(boxes)})</h3>"]
    for g, members in groups.items():
        if len(groups) > 1 or g:
            out.append(f'<h4 data-su={attr(g)}>{e(g or "no scalable unit")}</h4>')
        out.append(f'<div class="boxes" data-su={attr(g)}>' + "".join(_box(b, fabric, findings) for b in members)
                   + "</div>")
    return [*out, "</div>"]


def _bundles(fabric: _Fabric, lower: str, findings: Sequence[Finding]) -> list[str]:
    """One matrix per tier pair: a row per scalable unit of the lower tier, a column per switch above it, each cell
    the number of cables between them (up/planned), red when one of them fails: 20,000 cables in a few hundred cells."""
    keys = [k for k in fabric.bundles if k[0] == lower]
    if not keys:
        return []
    rows = sorted({k[1] for k in keys}, key=lambda g: natural_key(g or "\uffff"))
    cols = _sorted(fabric.boxes[k] for k in dict.fromkeys(k[2] for k in keys))
    upper = cols[0].tier
    title = f"{TIER_WORDS[lower]} → {TIER_WORDS[upper].lower()}: cables by scalable unit"
    out = [f'<div class="bundles" data-lower="{lower}" data-upper="{upper}">', f"<h3>{e(title)}</h3>",
           '<div class="scroll"><table class="bundles"><thead><tr><th></th>'
           + "".join(f'<th class="col" title={attr(c.name)}>{e(c.name)}</th>' for c in cols) + "</tr></thead><tbody>"]
    for g in rows:
        cells = []
        for c in cols:
            n = fabric.bundles.get((lower, g, c.key))
            if n is None:
                cells.append("<td></td>")
                continue
            marks = fabric.bundle_marks.get((lower, g, c.key), [])
            cls = "b-fail" if marks else "b-short" if fabric.planned and n.up != n.planned else "b-ok"
            shown = f"{n.up}/{n.planned}" if fabric.planned and n.up != n.planned else str(n.up)
            tip = (f"{g or TIER_WORDS[lower].lower()} → {c.name}: {counted(n.up, 'cable')} up"
                   + (f" of {n.planned} planned" if fabric.planned else "")
                   + "".join(f"\n{findings[i].sentence}" for i in marks[:MAX_MARKS]))
            cells.append(f'<td class="{cls}" data-up="{n.up}" data-failing="{len(marks)}" data-col={attr(c.name)} '
                         f"title={attr(tip)}>{e(shown)}</td>")
        out.append(f"<tr data-su={attr(g)}><th>{e(g or 'all')}</th>{''.join(cells)}</tr>")
    return [*out, "</tbody></table></div>", "</div>"]


def _leaves(fabric: _Fabric, findings: Sequence[Finding]) -> list[str]:
    """A row per scalable unit, a column per rail: a rail-optimised fabric reads as a grid, a leaf out of place
    stands out in its row. Leaves of no known rail flow side by side in their cell."""
    leaves = _sorted(b for b in fabric.boxes.values() if b.tier == "leaf")
    if not leaves:
        return []
    rails = sorted({b.rail for b in leaves if b.rail is not None})
    cols: list[int | None] = [*rails, None] if any(b.rail is None for b in leaves) else list(rails)
    grid: dict[str, dict[int | None, list[_Box]]] = {}
    for b in leaves:
        grid.setdefault(_group(b), {}).setdefault(b.rail, []).append(b)
    head = "".join(f'<th data-rail="{r}">rail {r}</th>' if r is not None else "<th>no rail</th>" for r in cols)
    out = ['<div class="tier" data-tier="leaf">',
           f"<h3>Leaves ({len(leaves)}) by scalable unit and rail</h3>",
           f'<div class="scroll"><table class="leaves"><thead><tr><th>scalable unit</th>{head}</tr></thead><tbody>']
    for g, by_rail in grid.items():
        cells = "".join('<td class="rail"' + ("" if r is None else f' data-rail="{r}"') + ">"
                        + '<div class="boxes">' + "".join(_box(b, fabric, findings) for b in by_rail.get(r, ()))
                        + "</div></td>" for r in cols)
        out.append(f'<tr class="su" data-su={attr(g)}><th>{e(g or "all leaves")}</th>{cells}</tr>')
    return [*out, "</tbody></table></div>", "</div>"]


def _findings(fabric: _Fabric, findings: Sequence[Finding]) -> list[str]:
    out = ['<div class="fv-list">', f"<h3>Failing cables ({len(findings)})</h3>"]
    if not findings:
        words = "Every cable is where the plan puts it." if fabric.planned else "No finding names a cable."
        return [*out, f"<p>{words}</p>", "</div>"]
    out.append('<table class="fv-findings"><thead><tr><th>kind</th><th>check</th><th>switches</th><th>ends</th>'
               "<th>hosts</th><th>what to do</th></tr></thead><tbody>")
    for i, f in enumerate(findings[:MAX_LISTED]):
        names = list(dict.fromkeys(fabric.boxes[k].name for k in fabric.where[i]))
        hosts = ", ".join(f.hosts[:MAX_HOSTS_NAMED]) + (f" (+{len(f.hosts) - MAX_HOSTS_NAMED} more)"
                                                        if len(f.hosts) > MAX_HOSTS_NAMED else "")
        out.append(f'<tr class="finding k-{e(f.kind)}" id="fab-f{i}" data-kind={attr(f.kind)} data-check={attr(f.check)} '
                   f"data-switches={attr(' '.join(names))}><td>{e(f.kind)}</td><td><code>{e(f.check)}</code></td>"
                   f"<td>{e(', '.join(names) or 'fabric-wide')}</td><td>{'<br>'.join(e(x) for x in f.ends)}</td>"
                   f"<td>{e(hosts)}</td><td>{e(f.sentence)}</td></tr>")
    out.append("</tbody></table>")
    if len(findings) > MAX_LISTED:
        out.append(f'<p class="more">{len(findings) - MAX_LISTED} more failing cables are not listed here; the '
                   "report's JSON names every one.</p>")
    return [*out, "</div>"]


def render(subnet: Subnet, findings: Sequence[Finding], roles: Mapping[str, Role], *, plan: Plan | None = None) -> str:
    """The fabric as an HTML section (`<section id="fabric">`, no script, anchors `fab-f<n>`) for a page whose style
    sheet includes CSS: `_html.page(title, [..., render(...)], css=<the page's own> + fabric_html.CSS)`.

    `findings` are the plan diff's (`Diff.findings`); `roles` places each switch (`Plan.roles()`, by short name,
    description or GUID); a switch without a role is placed by its cabling. With `plan`, every count says how many
    cables the plan expects there too."""
    findings = list(findings)
    fabric = _layout(subnet, findings, roles, plan)
    legend = "".join(f'<span><i class="{c}"></i>{e(w)}</span>' for c, w in _LEGEND)
    body = [f'<section id="fabric" class="fabric" data-switches="{sum(1 for _ in subnet.switches())}" '
            f'data-cas="{sum(1 for n in subnet.cas() if not is_aggregation_node(n))}" data-cables="{fabric.cables}" '
            f'data-failing="{len(findings)}">',
            "<h2>Fabric</h2>", f'<p class="fv-summary">{e(_summary(subnet, fabric, findings))}</p>']
    for tier in ("core", "spine"):
        body += _upper_tier(fabric, tier, findings)
    if fabric.bundles:
        body.append(f'<p class="fv-legend"><small>{legend}</small></p>')
    body += _bundles(fabric, "spine", findings) + _bundles(fabric, "leaf", findings)
    body += _leaves(fabric, findings) + _findings(fabric, findings)
    return "\n".join([*body, "</section>"])


def write_page(path: Path, subnet: Subnet, findings: Sequence[Finding], roles: Mapping[str, Role], title: str, *,
               plan: Plan | None = None) -> None:
    """The fabric view as a page of its own, written atomically (mode 600, as every report)."""
    findings = list(findings)
    status = "failed" if findings else "passed"
    header = [f'<header id="verdict" class="verdict status-{status}" data-status="{status}">',
              f'<h1><span class="word">{status.upper()}</span> · {e(title)}</h1>', "</header>"]
    atomic_write_text(Path(path), page(title, [*header, "<main>", render(subnet, findings, roles, plan=plan), "</main>"],
                                       css=CSS))


__all__ = ["CSS", "KINDS", "Finding", "Plan", "Role", "render", "write_page"]
