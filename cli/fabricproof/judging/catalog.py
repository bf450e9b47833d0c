"""The check catalog: load checks/<family>/<id>.yaml, validate them, and select by id or glob."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import documents
from ..errors import InputError, Problem
from ..model import Scope, Severity
from ..paths import checks_dir

#: The check families, one folder of checks/ each.
FAMILIES = ("fm", "fabric", "nvlink", "nvswitch", "ib", "rdma", "pcie", "gpu", "perf", "subnet")


@dataclass(frozen=True)
class Condition:
    path: tuple[str, ...]
    op: str
    expected: Any


@dataclass(frozen=True)
class Applicability:
    """One applies_when condition: the check applies to a host when a value at `fact` satisfies op."""

    fact: str
    op: str
    expected: Any
    reason: str


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    family: str
    severity: Severity
    scope: Scope
    subject: str
    collector: str
    fact: str
    op: str
    expected: Any = None
    quantifier: str = "all"
    compare: str | None = None
    allow_empty: bool = False
    where: tuple[Condition, ...] = ()
    platforms: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    applies_when: tuple[Applicability, ...] = ()
    partition: str | None = None
    rationale: str = ""
    remediation: str = ""
    references: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    description: str = ""
    source: str = ""
    finding: str = ""  # how one failing item reads after its name, e.g. "{value} of {expected} links active"
    probe: bool = False  # its collector is a probe or the fabric plan's diff: it applies only where that ran
    action: str = ""  # what its failure calls for (actions.ACTIONS); check.schema.json requires it of every check

    @property
    def baseline_keys(self) -> tuple[str, ...]:
        """Every baseline key the check reads (requires, expected, where)."""
        keys = list(self.requires)
        for exp in (self.expected, *(c.expected for c in self.where), *(a.expected for a in self.applies_when)):
            if isinstance(exp, dict) and "baseline" in exp:
                keys.append(exp["baseline"])
        return tuple(dict.fromkeys(keys))


def _check_from(doc: documents.Document, collectors: dict[str, Any] | None) -> Check:
    documents.validate(doc, "check")
    d = doc.data
    a = d["assert"]
    check = Check(
        id=d["id"],
        title=d["title"],
        family=d["family"],
        severity=Severity(d["severity"]),
        scope=Scope(d["scope"]),
        action=d["action"],
        subject=d["subject"],
        collector=d["collector"],
        fact=d["fact"],
        op=a["op"],
        expected=a.get("expected"),
        quantifier=a.get("quantifier", "all"),
        compare=a.get("compare"),
        allow_empty=a.get("allow_empty", False),
        where=tuple(Condition(tuple(c["path"].split("/")), c["op"], c.get("expected")) for c in a.get("where", ())),
        platforms=tuple(d.get("platforms", ())),
        requires=tuple(d.get("requires", ())),
        applies_when=tuple(Applicability(a["fact"], a["op"], a.get("expected"), a["reason"])
                           for a in d.get("applies_when", ())),
        partition=d.get("partition"),
        rationale=d["rationale"],
        remediation=d["remediation"].strip(),
        references=tuple(d["references"]),
        tags=tuple(d.get("tags", ())),
        description=d.get("description", ""),
        source=doc.file,
        finding=d.get("finding", ""),
    )
    if collectors is not None:
        col = collectors.get(check.collector)
        if col is None:
            raise InputError(doc.problem(("collector",), f"unknown collector {check.collector!r}"))
        if not (check.fact == col.provides or check.fact.startswith(col.provides + "/")):
            raise InputError(doc.problem(("fact",), f"fact {check.fact} is not provided by collector {check.collector} (it provides {col.provides})"))
        if getattr(col, "loads_fabric", False) or getattr(col, "fabric_scope", False):
            check = dataclasses.replace(check, probe=True)  # opt-in: judged only where it ran
    expected_name = Path(doc.file).stem
    if expected_name != check.id:
        raise InputError(doc.problem(("id",), f"check id {check.id!r} must match its file name {expected_name!r}"))
    return check


def load_file(path: Path, collectors: dict[str, Any] | None = None) -> Check:
    return _check_from(documents.load_yaml(path), collectors)


def load(directory: Path | None = None, collectors: dict[str, Any] | None = None) -> list[Check]:
    """Load every check under directory (default: the shipped catalog), sorted by id; ids must be unique."""
    if collectors is None:
        from ..collectors import COLLECTORS

        collectors = COLLECTORS
    root = Path(directory) if directory else checks_dir()
    if not root.is_dir():
        raise InputError(Problem("check directory not found", str(root)))
    checks: dict[str, Check] = {}
    problems: list[Problem] = []
    for path in sorted(root.rglob("*.yaml")):
        try:
            check = load_file(path, collectors)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        if check.id in checks:
            problems.append(Problem(f"duplicate check id {check.id!r} (also in {checks[check.id].source})", str(path)))
            continue
        checks[check.id] = check
    if problems:
        raise InputError(problems)
    return sorted(checks.values(), key=lambda c: c.id)


def select(checks: Iterable[Check], patterns: Iterable[str] | None) -> list[Check]:
    """Checks whose id matches any glob (or exact id); a pattern that matches nothing is an error."""
    checks = list(checks)
    pats = [p for pat in (patterns or ()) for p in pat.split(",") if p.strip()]
    if not pats:
        return checks
    chosen: dict[str, Check] = {}
    for pat in pats:
        hits = [c for c in checks if fnmatch.fnmatchcase(c.id, pat.strip()) or c.family == pat.strip()]
        if not hits:
            raise InputError(f"--checks {pat!r} matches no check id (see `fabricproof checks list`)")
        chosen.update((c.id, c) for c in hits)
    return [c for c in checks if c.id in chosen]
