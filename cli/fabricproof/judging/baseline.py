"""Baselines: load and validate a Baseline document, and resolve the values that apply to a host's groups."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import documents
from ..errors import InputError, Problem

UNSET = object()


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key; anything else in `over` replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def lookup(values: dict[str, Any], dotted: str) -> Any:
    """baseline value at 'nvlink.links_per_gpu', or UNSET."""
    node: Any = values
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return UNSET
        node = node[part]
    return node


def leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted key of every value that is not a non-empty mapping, in document order."""
    out: list[str] = []
    for k, v in values.items():
        dotted = f"{prefix}{k}"
        out.extend(leaves(v, dotted + ".") if isinstance(v, dict) and v else [dotted])
    return out


@dataclass(frozen=True)
class Baseline:
    name: str
    defaults: dict[str, Any]
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    group_lines: dict[str, int] = field(default_factory=dict, compare=False)  # group -> its line in the source

    def for_groups(self, groups: Iterable[str]) -> dict[str, Any]:
        """The values for a host in these inventory groups: defaults, then matching groups in name order."""
        values = self.defaults
        for g in sorted(set(groups) & self.groups.keys()):
            values = merge(values, self.groups[g])
        return values

    def sources(self, groups: Iterable[str]) -> dict[str, str]:
        """Where each value for_groups(groups) gives comes from, by dotted key: "defaults" or "groups.<group>".
        The last layer holding a key set it: merge() keeps mappings and replaces anything else."""
        layers = [("defaults", self.defaults)] + [(f"groups.{g}", self.groups[g])
                                                  for g in sorted(set(groups) & self.groups.keys())]
        out: dict[str, str] = {}
        for dotted in leaves(self.for_groups(groups)):
            out[dotted] = next(label for label, values in reversed(layers) if lookup(values, dotted) is not UNSET)
        return out

    def to_document(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"defaults": copy.deepcopy(self.defaults)}
        if self.groups:
            spec["groups"] = copy.deepcopy(self.groups)
        return {"apiVersion": "fabricproof/v1", "kind": "Baseline", "metadata": {"name": self.name, **self.metadata}, "spec": spec}


def from_document(doc: documents.Document) -> Baseline:
    documents.validate(doc, "baseline")
    data = doc.data
    meta = {k: v for k, v in data["metadata"].items() if k != "name"}
    return Baseline(
        name=data["metadata"]["name"],
        defaults=data["spec"].get("defaults") or {},
        groups=data["spec"].get("groups") or {},
        source=doc.file,
        metadata=meta,
        group_lines={g: line for g in data["spec"].get("groups") or {}
                     if (line := doc.line(("spec", "groups", g))) is not None},
    )


#: Groups Ansible puts every host in: never one of a host's own groups, so an override under them selects nothing.
IMPLICIT_GROUPS = ("all", "ungrouped")


def check_groups(baseline: Baseline, inventory_groups: Iterable[str], inventory: str) -> None:
    """Every spec.groups key names a group of the inventory: a misspelt group (dgx_h10 for dgx_h100) selects no
    host, so its hosts would be judged on the defaults alone. InputError (exit 2) naming file, line and path."""
    known = sorted(set(inventory_groups) - set(IMPLICIT_GROUPS))
    problems = []
    for group in baseline.groups:
        if group in known:
            continue
        hint = difflib.get_close_matches(group, known, n=1)
        if group in IMPLICIT_GROUPS:
            tip = "; it holds no host's own values: put them in spec.defaults"
        elif hint:
            tip = f"; did you mean {hint[0]!r}?"
        else:
            tip = f"; its groups: {', '.join(known[:12])}" + (" ..." if len(known) > 12 else "") if known else ""
        problems.append(Problem(f"no group {group!r} in inventory {inventory}{tip}", baseline.source,
                                baseline.group_lines.get(group), documents.pointer(("spec", "groups", group))))
    if problems:
        raise InputError(problems)


def load(path: Path) -> Baseline:
    """Load and validate a baseline; InputError (exit 2) names file:line and JSON path."""
    return from_document(documents.load_yaml(Path(path)))
