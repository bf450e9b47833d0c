"""The part of a facts document a set of checks reads, so a fleet run keeps kilobytes per host in memory, not the whole document."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .catalog import Check
from .findings import naming_pointers
from .pointer import last_star, split_pointer

# A trie of pointer segments: {segment: subtrie}; "*" matches every key or item. KEEP marks a node whose
# whole subtree is read (a pointer ends there), which absorbs anything deeper.
Trie = dict[str, Any]
KEEP: Trie = {}

#: Top-level keys kept whatever the checks: the inventory groups, which evaluation reads on every host,
#: and the small identity fields of the document.
ALWAYS = ("apiVersion", "kind", "host", "via", "groups", "collected_at")


def pointers(check: Check) -> list[tuple[str, ...]]:
    """Every facts path a check reads: its collector's status (errors, skips, evidence), its fact, its
    `where` paths (under the fact's last '*'), facts named as expected values, its applies_when facts, and the
    fields that name the items a finding points into (a GPU's index)."""
    segs = split_pointer(check.fact)
    out = [("collectors", check.collector), segs, *naming_pointers(segs)]
    star = last_star(segs)
    base = segs[: star + 1] if star >= 0 else segs
    for cond in check.where:
        out.append((*base, *cond.path))
    for spec in (check.expected, *(c.expected for c in check.where), *(a.expected for a in check.applies_when)):
        if isinstance(spec, dict) and "fact" in spec:
            out.append(split_pointer(spec["fact"]))
    out.extend(split_pointer(a.fact) for a in check.applies_when)
    return out


def _add(trie: Trie, segs: tuple[str, ...]) -> Trie:
    if trie is KEEP:
        return KEEP
    if not segs:
        return KEEP
    head, rest = segs[0], segs[1:]
    trie[head] = _add(trie.get(head, {}), rest)
    return trie


def _merge(a: Trie, b: Trie) -> Trie:
    """A trie reading what either reads."""
    if a is KEEP or b is KEEP:
        return KEEP
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if k in out else v
    return out


def _fold_stars(trie: Trie) -> Trie:
    """Fold each '*' subtrie into its named siblings (a named key is also matched by '*'), so projecting
    needs one lookup per key."""
    if trie is KEEP:
        return KEEP
    star = trie.get("*")
    out: Trie = {}
    for k, v in trie.items():
        merged = _merge(v, star) if star is not None and k != "*" else v
        out[k] = _fold_stars(merged)
    return out


def trie_for(checks: Iterable[Check]) -> Trie:
    """The trie of everything these checks read, plus the sections every evaluation reads."""
    trie: Trie = {}
    for section in ALWAYS:
        trie = _add(trie, (section,))
    for check in checks:
        for segs in pointers(check):
            trie = _add(trie, segs)
    return _fold_stars(trie)


def project(doc: Any, trie: Trie) -> Any:
    """A copy of `doc` holding only what the trie reads. Key order and list positions are kept (a list
    reached by a '*' keeps every item, projected), so evaluation over the projection gives exactly the
    verdicts, values and paths it gives over the whole document."""
    if trie is KEEP or not isinstance(doc, (dict, list)):
        return doc
    if isinstance(doc, dict):
        star = trie.get("*")
        out = {}
        for k, v in doc.items():
            sub = trie.get(k, star)
            if sub is not None:
                out[k] = project(v, sub)
        return out
    star = trie.get("*")
    if star is None:
        return doc  # read by index only (rare): keep the list as it is, positions and all
    return [project(v, trie.get(str(i), star)) for i, v in enumerate(doc)]


def projector(checks: Iterable[Check]):
    """A function from a facts document to its projection for these checks."""
    trie = trie_for(checks)

    def apply(doc: Mapping[str, Any]) -> dict[str, Any]:
        return project(doc, trie)

    return apply


def collectors_read(checks: Iterable[Check], collectors: Mapping[str, Any]) -> list[str]:
    """The ids of every collector whose facts these checks read, in registry order: each check's own, and the
    ones providing a fact it compares with or its applies_when reads (fm.version_matches_driver compares with
    /gpu/driver_version and applies where /nvswitch/pci/count > 0). Collecting only each check's own collector
    leaves those facts missing, and a healthy host is judged unknown. Where several collectors fill the same
    facts (nvidia_smi_q and its XML twin), the registry's default ones stand for them. A collector that serves only
    some platforms brings the one the host's platform is read from: its failure on another platform is a skip, not
    an error (facts.mark_not_applicable)."""
    from ..facts import PLATFORM_FACT, reads_platform

    wanted: set[str] = set()
    read: set[tuple[str, ...]] = set()
    for check in checks:
        if not getattr(collectors.get(check.collector), "fabric_scope", False):  # the plan diff runs on no host
            wanted.add(check.collector)
        read.update(segs for segs in pointers(check) if segs[:1] != ("collectors",))
    if any(reads_platform(collectors[cid]) for cid in wanted if cid in collectors):
        read.add(split_pointer(PLATFORM_FACT))
    for cid, col in collectors.items():
        if cid in wanted or not getattr(col, "default", False):
            continue
        provides = split_pointer(col.provides)
        if any(segs[: len(provides)] == provides or provides[: len(segs)] == segs for segs in read):
            wanted.add(cid)
    return [cid for cid in collectors if cid in wanted]


def collected_for(checks: Iterable[Check]) -> list[Any]:
    """The collectors a live collection runs for these checks (validate --checks, a gate's or a step's checks):
    collectors_read less the probes, whose facts only the probe runner makes, behind the idle guard."""
    from ..collectors import COLLECTORS

    return [COLLECTORS[cid] for cid in collectors_read(checks, COLLECTORS) if not COLLECTORS[cid].loads_fabric]
