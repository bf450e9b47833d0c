"""The check catalog: load checks/<family>/<id>.yaml, validate them, and select by id or glob."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__, cache, documents
from ..errors import InputError, Problem
from ..model import Scope, Severity
from ..paths import checks_dir, schemas_dir

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


#: The packaged catalog, once loaded, is kept (cache.py) under this name; a new FORMAT discards what was kept.
CACHE_NAME = "catalog"
CACHE_FORMAT = 1
#: The shipped catalog this process loaded afresh and has not kept yet: its key and data, for keep().
_unkept: tuple[str, Any] | None = None


def _cache_key(root: Path, paths: list[Path], collectors: dict[str, Any]) -> str:
    """What the packaged catalog's checks are made from: every check file's name and bytes, the check schema, this
    module and the documents reader, the version, and what loading reads of each collector."""
    digest = hashlib.sha256(f"{CACHE_FORMAT}\0{__version__}\0{root}\0".encode())
    sources = [Path(__file__), Path(documents.__file__), schemas_dir() / "check.schema.json"]
    for source in (*sources, *paths):
        data = source.read_bytes()
        digest.update(f"{source}\0{len(data)}\0".encode())
        digest.update(data)
    for cid, col in sorted(collectors.items()):
        digest.update(f"{cid}\0{col.provides}\0{getattr(col, 'loads_fabric', False)}\0"
                      f"{getattr(col, 'fabric_scope', False)}\n".encode())
    return digest.hexdigest()


def _kept(data: Any) -> list[Check]:
    """Checks from what `_keep` made of them."""
    tuples = {"platforms", "requires", "references", "tags"}
    checks = []
    for d in data:
        d = {k: tuple(v) if k in tuples else v for k, v in d.items()}
        d["severity"], d["scope"] = Severity(d["severity"]), Scope(d["scope"])
        d["where"] = tuple(Condition(tuple(c["path"]), c["op"], c["expected"]) for c in d["where"])
        d["applies_when"] = tuple(Applicability(**a) for a in d["applies_when"])
        checks.append(Check(**d))
    return checks


def _keep(checks: list[Check]) -> Any:
    return [dataclasses.asdict(c) for c in checks]


def load(directory: Path | None = None, collectors: dict[str, Any] | None = None) -> list[Check]:
    """Load every check under directory (default: the shipped catalog), sorted by id; ids must be unique.

    The shipped catalog, once a command has kept it (keep()), is read back while its files, schema and code are byte
    for byte what it was made from: `check --local`, which Slurm runs on every node every few minutes, then reads
    one file (~5 ms of CPU) rather than parsing and checking every check (~50 ms)."""
    global _unkept
    shipped = directory is None and collectors is None
    if collectors is None:
        from ..collectors import COLLECTORS

        collectors = COLLECTORS
    root = Path(directory) if directory else checks_dir()
    if not root.is_dir():
        raise InputError(Problem("check directory not found", str(root)))
    paths = sorted(root.rglob("*.yaml"))
    key = ""
    if shipped:
        try:
            key = _cache_key(root, paths, collectors)
        except OSError:  # a file gone or unreadable: the load below names it
            key = ""
        kept = cache.read(CACHE_NAME, key) if key else None
        if kept is not None:
            try:
                return _kept(kept)
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # not what _keep writes: loaded afresh and kept again below
    checks: dict[str, Check] = {}
    problems: list[Problem] = []
    for path in paths:
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
    loaded = sorted(checks.values(), key=lambda c: c.id)
    if key:
        try:
            data = json.loads(json.dumps(_keep(loaded)))
        except (TypeError, ValueError):  # a YAML value JSON cannot hold (a date): nothing kept
            return loaded
        if _kept(data) == loaded:  # kept only what reads back equal
            _unkept = (key, data)
    return loaded


def keep() -> None:
    """Keep the shipped catalog this process loaded afresh (if it did) for later runs: a command calls it once its
    run is done, so a run refused for bad input leaves nothing behind."""
    global _unkept
    if _unkept is not None:
        cache.write(CACHE_NAME, *_unkept)
        _unkept = None


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
