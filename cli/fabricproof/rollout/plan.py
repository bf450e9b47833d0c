"""Rollout plans: load and validate a plan (file:line errors), and compute its waves from an inventory. Pure
apart from reading the plan and the files it names."""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judging import baseline as baseline_mod
from .. import documents
from ..judging.catalog import Check
from ..errors import InputError, Problem
from ..inventory import Inventory, limit
from ..paths import playbooks_dir
from ..timeutil import format_duration, parse_duration  # noqa: F401 - format_duration: plan summaries use it from here

DEFAULT_RETRY_INTERVAL_S = 10
DEFAULT_GATE_TIMEOUT_S = 300
#: on_failure policies, each with what it rolls back when a wave fails.
POLICIES = {
    "rollback_wave": "the failing wave's changed hosts",
    "rollback_all": "every changed host, newest wave first",
    "halt": "nothing automatically (policy halt); `fabricproof rollback RUN` on demand",
}

# ------------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Budget:
    """The most failed hosts a wave may have and still proceed.

    Boundary: both limits are inclusive ("at most"). A wave of N hosts with F failed passes when
    F <= max_failed_hosts and, if max_failed_percent is set, F * 100 <= max_failed_percent * N.
    So 0 tolerates no failure; 10% of 10 hosts tolerates 1; 10% of 9 hosts tolerates none (1/9 = 11.1%).
    """

    max_failed_hosts: int = 0
    max_failed_percent: float | None = None

    def allows(self, failed: int, total: int) -> bool:
        if failed <= 0:
            return True
        if failed > self.max_failed_hosts:
            return False
        return self.max_failed_percent is None or failed * 100 <= self.max_failed_percent * total

    def tolerated(self, total: int) -> int:
        """How many of `total` hosts may fail."""
        return max((f for f in range(total + 1) if self.allows(f, total)), default=0)

    def describe(self) -> str:
        parts = [f"at most {self.max_failed_hosts} failed host{'s' if self.max_failed_hosts != 1 else ''}"]
        if self.max_failed_percent is not None:
            parts.append(f"at most {self.max_failed_percent:g}% of the wave")
        return " and ".join(parts)


@dataclass(frozen=True)
class Playbook:
    path: Path
    vars: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Gates:
    """The plan's gates: what every gate shares (the severity that fails a host, retries, the budget) and each gate
    kind's own settings by its name in rollout.gates.GATES, for the kinds the plan uses, in registry order."""

    fail_on: str = "critical"
    retry_interval_s: int = DEFAULT_RETRY_INTERVAL_S
    timeout_s: int = DEFAULT_GATE_TIMEOUT_S
    budget: Budget = Budget()
    kinds: Mapping[str, Any] = field(default_factory=dict)

    @property
    def checks(self) -> tuple[str, ...]:
        """The checks gate's catalog patterns; empty = whole catalog."""
        return self.kinds.get("checks", ())

    def active(self) -> list[tuple[Any, Any]]:
        """(gate kind, its settings) of every kind the plan uses, in the order a wave runs them."""
        from .gates import GATES

        return [(GATES[name], spec) for name, spec in self.kinds.items()]

    def joining(self) -> list[tuple[Any, Any]]:
        """The kinds that judge inside the post-gate step, on the hosts the checks proved."""
        from .gates.base import JOIN

        return [(kind, spec) for kind, spec in self.active() if kind.after_stage == JOIN]

    @property
    def host_timeout_s(self) -> float:
        """How long a gate's collection may spend on one host: no longer than the gate's timeout (one silent host
        must not hold an attempt past its gate), never below the shortest collector timeout, never above the
        collection's default."""
        from ..collect import DEFAULT_HOST_TIMEOUT_S
        from ..tools import MIN_TIMEOUT_S

        return float(min(DEFAULT_HOST_TIMEOUT_S, max(MIN_TIMEOUT_S, self.timeout_s)))


@dataclass(frozen=True)
class Drain:
    scheduler: str  # slurm | kubernetes | none
    drain: Path
    undrain: Path
    vars: Mapping[str, Any] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return self.scheduler != "none"


@dataclass(frozen=True)
class WaveSpec:
    """One wave as written: size is an int count, a float percent, 'rest', or ('pattern', P)."""

    name: str
    size: int | float | str | tuple[str, str]
    batch: int | float | None = None  # int count or float percent of the wave
    pause: bool = False
    budget: Budget = Budget()
    soak_s: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class Plan:
    name: str
    source: Path
    target: str
    apply: Playbook
    rollback: Playbook
    before: Path
    after: Path
    waves: tuple[WaveSpec, ...]
    gates: Gates
    on_failure: str = "rollback_wave"
    drain: Drain | None = None
    reports: tuple[str, ...] = ("json",)
    inventory: Path | None = None
    unit_group: str | None = None
    description: str = ""
    ticket: str = ""
    target_line: int | None = None

    def problem(self, message: str, line: int | None = None, pointer: str = "") -> Problem:
        return Problem(message, str(self.source), line, pointer)

    @property
    def soak(self) -> Any:
        """The soak gate's settings (gates.soak.Soak), or None when the plan has no soak."""
        return self.gates.kinds.get("soak")


@dataclass(frozen=True)
class Wave:
    """A computed wave: its units (tuples of hosts) and the batches they are applied in."""

    index: int
    name: str
    units: tuple[tuple[str, ...], ...]
    batches: tuple[tuple[str, ...], ...]
    pause: bool
    budget: Budget
    soak_s: int | None

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(h for unit in self.units for h in unit)

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "hosts": list(self.hosts),
                "units": [list(u) for u in self.units], "batches": [list(b) for b in self.batches],
                "pause": self.pause, "max_failed_hosts": self.budget.max_failed_hosts,
                "max_failed_percent": self.budget.max_failed_percent, "soak_s": self.soak_s}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Wave:
        return cls(index=d["index"], name=d["name"], units=tuple(tuple(u) for u in d["units"]),
                   batches=tuple(tuple(b) for b in d["batches"]), pause=d["pause"],
                   budget=Budget(d["max_failed_hosts"], d["max_failed_percent"]), soak_s=d["soak_s"])


# ------------------------------------------------------------------------------------------ loading


def _percent(text: str) -> float:
    return float(text.rstrip("%"))


def _size(raw: Any) -> int | float | str | tuple[str, str]:
    if isinstance(raw, dict):
        return ("pattern", raw["pattern"])
    if isinstance(raw, str) and raw.endswith("%"):
        return _percent(raw)
    return raw


_PLAY_KEYS = ("hosts", "import_playbook", "ansible.builtin.import_playbook")


def resolve_playbook(name: str, base: Path) -> Path:
    """A playbook next to the plan wins; otherwise the shipped playbooks/ directory. It must lie inside one of
    the two (no `..` or absolute path out of them) and be an Ansible playbook: a list of plays, each with
    `hosts:` or an `import_playbook:`. ValueError says which of these it is not."""
    roots = (base.resolve(), playbooks_dir().resolve())
    for root in roots:
        p = (root / name).resolve()
        if p.is_file():
            if not any(p.is_relative_to(r) for r in roots):
                raise ValueError(f"playbook {name!r} is {p}, outside {roots[0]} and {roots[1]}: a change runs "
                                 "only playbooks kept with its plan or shipped in playbooks/")
            try:
                plays = documents.parse_yaml(documents.read_text(p), str(p)).data
            except InputError as exc:
                raise ValueError(f"playbook {name!r} cannot be read: {exc.problems[0]}") from None
            if not (isinstance(plays, list) and plays and all(
                    isinstance(play, dict) and any(k in play for k in _PLAY_KEYS) for play in plays)):
                raise ValueError(f"{name!r} ({p}) is not an Ansible playbook: expected a list of plays, each with "
                                 "hosts: or import_playbook:")
            return p
    raise ValueError(f"playbook {name!r} not found in {roots[0]} or {roots[1]}")


DURATION_KEYS = ("timeout", "retry_interval", "duration", "interval", "soak")
#: What a wave's size and batch may be, said once: the schema's branches would each report their own complaint.
SIZE_ALLOWED = ("a whole number of units, at least 1; a percentage above 0% and at most 100% (25%, 12.5%); 'rest' "
                "(the last wave); or {pattern: P}")
BATCH_ALLOWED = "a whole number of units, at least 1; or a percentage of the wave above 0% and at most 100% (50%)"
_WAVE_AMOUNT = re.compile(r"^/spec/waves/(\d+)/(size|batch)$")


def _amount_problem(what: str, value: Any) -> str:
    allowed = SIZE_ALLOWED if what == "size" else BATCH_ALLOWED
    return f"{what} {value!r} is not allowed: a wave {what} is {allowed}"


def _validate_schema(doc: documents.Document) -> None:
    """Schema validation, with one plain message for a malformed duration, wave size or batch instead of the
    schema's branches."""
    try:
        documents.validate(doc, "rollout")
    except InputError as exc:
        for p in exc.problems:
            if p.pointer.rsplit("/", 1)[-1] in DURATION_KEYS and ("is not of type" in p.message
                                                                   or "does not match" in p.message):
                p.message = "not a duration: use seconds (90) or a string like 90s, 5m, 1h30m"
            amount = _WAVE_AMOUNT.match(p.pointer)
            if amount:
                p.message = _amount_problem(amount[2], doc.data["spec"]["waves"][int(amount[1])][amount[2]])
        raise InputError(exc.problems) from None


def from_document(doc: documents.Document, catalog: Sequence[Check] | None = None) -> Plan:
    """Validate a plan document (schema, then meaning) and resolve the files it names."""
    _validate_schema(doc)
    if catalog is None:
        from ..judging import catalog as catalog_mod

        catalog = catalog_mod.load()
    d = doc.data
    spec = d["spec"]
    base = Path(doc.file).resolve().parent
    problems: list[Problem] = []

    def playbook_at(path: tuple[Any, ...], name: str) -> Path:
        try:
            return resolve_playbook(name, base)
        except ValueError as exc:
            problems.append(doc.problem(path, str(exc)))
            return base / name

    def file_at(path: tuple[Any, ...], name: str, what: str) -> Path:
        p = (base / name).resolve()
        if not p.is_file():
            problems.append(doc.problem(path, f"{what} {name!r} not found (relative to {base})"))
        return p

    change = spec["change"]
    apply = Playbook(playbook_at(("spec", "change", "apply", "playbook"), change["apply"]["playbook"]),
                     dict(change["apply"].get("vars") or {}))
    rollback = Playbook(playbook_at(("spec", "change", "rollback", "playbook"), change["rollback"]["playbook"]),
                        dict(change["rollback"].get("vars") or {}))
    before = file_at(("spec", "baseline", "before"), spec["baseline"]["before"], "baseline")
    after = file_at(("spec", "baseline", "after"), spec["baseline"]["after"], "baseline")
    loaded = []
    for key, path in (("before", before), ("after", after)):
        if path.is_file():
            try:
                loaded.append(baseline_mod.load(path))
            except InputError as exc:
                problems.extend(exc.problems)

    from .gates import GATES
    from .gates.base import Block

    g = spec["gates"]
    budget = Budget(g.get("max_failed_hosts", 0), g.get("max_failed_percent"))
    kinds: dict[str, Any] = {}
    for name, kind in GATES.items():
        parsed = kind.parse(Block(doc, spec, catalog, kinds), problems)
        if parsed is not None:
            kinds[name] = parsed
    gates = Gates(fail_on=g.get("fail_on", "critical"),
                  retry_interval_s=parse_duration(g.get("retry_interval", DEFAULT_RETRY_INTERVAL_S)),
                  timeout_s=parse_duration(g.get("timeout", DEFAULT_GATE_TIMEOUT_S)), budget=budget, kinds=kinds)
    if gates.retry_interval_s == 0 and gates.timeout_s > 0:
        problems.append(doc.problem(("spec", "gates", "retry_interval"), "retry_interval must be at least 1s"))
    soak = kinds.get("soak")

    waves: list[WaveSpec] = []
    seen: dict[str, int] = {}
    for i, w in enumerate(spec["waves"]):
        at = ("spec", "waves", i)
        if w["name"] in seen:
            problems.append(doc.problem(at + ("name",), f"wave name {w['name']!r} is already used by wave {seen[w['name']] + 1}"))
        seen.setdefault(w["name"], i)
        size = _size(w["size"])
        if isinstance(size, float) and size <= 0:
            problems.append(doc.problem(at + ("size",), _amount_problem("size", w["size"])))
        batch = _size(w["batch"]) if "batch" in w else None
        if isinstance(batch, float) and batch <= 0:
            problems.append(doc.problem(at + ("batch",), _amount_problem("batch", w["batch"])))
        wave_budget = Budget(w.get("max_failed_hosts", budget.max_failed_hosts),
                             w.get("max_failed_percent", budget.max_failed_percent))
        if soak is None and "soak" in w:
            problems.append(doc.problem(at + ("soak",), "a wave soak needs spec.soak (which counters to watch)"))
        soak_s = parse_duration(w["soak"]) if "soak" in w else (soak.duration_s if soak else None)
        waves.append(WaveSpec(w["name"], size, batch, w.get("pause", False), wave_budget, soak_s,  # type: ignore[arg-type]
                              doc.line(at)))
    for i, w in enumerate(waves[:-1]):
        if w.size == "rest":
            problems.append(doc.problem(("spec", "waves", i, "size"), "'rest' takes every remaining unit: only the "
                                                                       "last wave can use it"))
    if waves and waves[0].pause:
        problems.append(doc.problem(("spec", "waves", 0, "pause"), "the pilot cannot pause before itself: run "
                                                                   "`rollout plan` to review it instead"))

    drain = None
    if "drain" in spec:
        dr = spec["drain"]
        scheduler = dr.get("scheduler", "none")
        drain = Drain(scheduler,
                      playbook_at(("spec", "drain", "drain"), dr.get("drain", "drain.yml")),
                      playbook_at(("spec", "drain", "undrain"), dr.get("undrain", "undrain.yml")),
                      dict(dr.get("vars") or {}))
        for name, parsed in kinds.items():
            if conflict := GATES[name].drain_conflict(scheduler, parsed, loaded):
                problems.append(doc.problem(("spec", "drain", "scheduler"), conflict))

    if problems:
        raise InputError(problems)
    meta = d["metadata"]
    return Plan(
        name=meta["name"], description=meta.get("description", ""), ticket=meta.get("ticket", ""),
        source=Path(doc.file).resolve(), target=spec["target"], apply=apply, rollback=rollback,
        before=before, after=after, waves=tuple(waves), gates=gates,
        on_failure=spec.get("on_failure", "rollback_wave"), drain=drain,
        reports=tuple(spec.get("reports") or ("json",)),
        inventory=(base / spec["inventory"]).resolve() if "inventory" in spec else None,
        unit_group=(spec.get("units") or {}).get("group"), target_line=doc.line(("spec", "target")),
    )


def load(path: Path, catalog: Sequence[Check] | None = None) -> Plan:
    """Load and validate a plan file; InputError (exit 2) names file:line and JSON path. Only a regular file: a
    plan is read again on resume, copied into the run, and names its playbooks and baselines relative to itself."""
    documents.regular_file(Path(path), "a rollout plan is read again on resume, kept with the run, and names its "
                                       "playbooks and baselines relative to itself; save it to a file")
    return from_document(documents.load_yaml(Path(path)), catalog)


# -------------------------------------------------------------------------------------------- waves


def units_of(hosts: Sequence[str], host_groups: Mapping[str, Iterable[str]], group_glob: str | None) -> list[tuple[str, ...]]:
    """Hosts grouped into units, ordered by first host. With a glob, the hosts of each matching group form one
    unit (a GB200 rack); a host in no matching group is its own unit; a host in two matching groups is an error."""
    if not group_glob:
        return [(h,) for h in sorted(hosts)]
    by_group: dict[str, list[str]] = {}
    problems: list[str] = []
    for h in sorted(hosts):
        groups = sorted(g for g in host_groups.get(h, ()) if fnmatch.fnmatchcase(g, group_glob))
        if len(groups) > 1:
            problems.append(f"host {h} is in {len(groups)} unit groups ({', '.join(groups)}); a host must belong to one unit")
            continue
        by_group.setdefault(groups[0] if groups else f"\0{h}", []).append(h)
    if problems:
        raise InputError([Problem(p) for p in problems])
    return sorted((tuple(hs) for hs in by_group.values()), key=lambda u: u[0])


def _limit_reason(exc: InputError) -> str:
    """inventory.limit() speaks of --limit; in a plan the pattern is the target or a wave's."""
    return re.sub(r"^--limit '[^']*' ?:? ?", "", exc.problems[0].message)


def _take(count: float, total: int) -> int:
    """Units a size stands for: a count, or a percent of all target units rounded down but at least 1."""
    if isinstance(count, float):
        return max(1, math.floor(total * count / 100 + 1e-9))
    return count


def _batches(units: Sequence[tuple[str, ...]], batch: float | None) -> tuple[tuple[str, ...], ...]:
    if not units:
        return ()
    size = len(units) if batch is None else min(len(units), _take(batch, len(units)))
    return tuple(tuple(h for u in units[i:i + size] for h in u) for i in range(0, len(units), size))


def compute_waves(plan: Plan, inventory: Inventory, target: Sequence[str] | None = None) -> list[Wave]:
    """Place every target unit in exactly one wave, pilot first. Errors name the plan file and the wave's line."""
    if target is None:
        try:
            target = limit(inventory, plan.target)
        except InputError as exc:
            reason = _limit_reason(exc)
            raise InputError(plan.problem(f"target {plan.target!r} in {inventory.source}: {reason}",
                                          plan.target_line, "/spec/target")) from None
    hosts = list(target)
    units = units_of(hosts, inventory.groups_of(), plan.unit_group)
    remaining = list(units)
    total = len(units)
    out: list[Wave] = []
    problems: list[Problem] = []
    for i, spec in enumerate(plan.waves):
        ptr = f"/spec/waves/{i}/size"
        if spec.size == "rest":
            chosen = list(remaining)
        elif isinstance(spec.size, tuple):
            try:
                matching = set(limit(inventory, spec.size[1]))
            except InputError as exc:
                reason = _limit_reason(exc)
                problems.append(plan.problem(f"wave {spec.name!r}: pattern {spec.size[1]!r}: {reason}", spec.line, ptr))
                continue
            chosen = [u for u in remaining if matching.intersection(u)]
        else:
            chosen = remaining[:_take(spec.size, total)]
        if not chosen:
            why = "no remaining target unit matches its pattern" if isinstance(spec.size, tuple) else "no unit is left for it"
            problems.append(plan.problem(f"wave {spec.name!r} is empty: {why}", spec.line, ptr))
            continue
        taken = set(chosen)
        remaining = [u for u in remaining if u not in taken]
        out.append(Wave(index=len(out), name=spec.name, units=tuple(chosen), batches=_batches(chosen, spec.batch),
                        pause=spec.pause, budget=spec.budget, soak_s=spec.soak_s))
    if remaining and not problems:
        left = [h for u in remaining for h in u]
        shown = ", ".join(left[:5]) + (f" (+{len(left) - 5} more)" if len(left) > 5 else "")
        problems.append(plan.problem(f"the waves place {total - len(remaining)} of {total} target units; "
                                     f"{shown} would never be changed: end with a wave of size 'rest' or 100%",
                                     plan.waves[-1].line, f"/spec/waves/{len(plan.waves) - 1}"))
    if problems:
        raise InputError(problems)
    return out


def describe(plan: Plan, waves: Sequence[Wave], inventory: str, gate_checks: Sequence[Check],
             soak_checks: Sequence[Check]) -> dict[str, Any]:
    """What `rollout plan` shows: hosts per wave, gates and thresholds, soak, and the rollback path (pure)."""
    g = plan.gates
    total = sum(len(w.hosts) for w in waves)
    return {
        "plan": plan.name, "description": plan.description, "file": str(plan.source), "inventory": inventory,
        "target": plan.target, "hosts": total, "units": plan.unit_group or "host",
        "change": {"apply": str(plan.apply.path), "apply_vars": dict(plan.apply.vars),
                   "rollback": str(plan.rollback.path), "rollback_vars": dict(plan.rollback.vars)},
        "baseline": {"before": str(plan.before), "after": str(plan.after)},
        "waves": [{**w.as_dict(), "tolerated_failures": w.budget.tolerated(len(w.hosts)),
                   "budget": w.budget.describe()} for w in waves],
        "gates": {"checks": [c.id for c in gate_checks], "fail_on": g.fail_on, "retry_interval_s": g.retry_interval_s,
                  "timeout_s": g.timeout_s, "host_timeout_s": g.host_timeout_s, "max_failed_hosts": g.budget.max_failed_hosts,
                  "max_failed_percent": g.budget.max_failed_percent,
                  **{k: v for kind, spec in g.active() for k, v in kind.describe(spec).items()},
                  "boundary": "a wave proceeds when its failed hosts <= max_failed_hosts and, if set, failed * 100 "
                              "<= max_failed_percent * hosts in the wave (both inclusive)"},
        "soak": ({"duration_s": plan.soak.duration_s, "interval_s": plan.soak.interval_s,
                  "checks": [c.id for c in soak_checks]} if plan.soak else None),
        "on_failure": plan.on_failure,
        "drain": ({"scheduler": plan.drain.scheduler, "drain": str(plan.drain.drain),
                   "undrain": str(plan.drain.undrain)} if plan.drain else None),
        "rollback_steps": rollback_steps(plan),
        "reports": list(plan.reports),
    }


def rollback_steps(plan: Plan) -> list[str]:
    """The rollback path in words, in the order the executor takes it."""
    steps = [f"on a failed wave: roll back {POLICIES[plan.on_failure]}"]
    if plan.drain and plan.drain.enabled:
        steps.append(f"drain hosts not already drained ({plan.drain.drain.name}, {plan.drain.scheduler})")
    steps.append(f"run {plan.rollback.path.name} on them, in the wave's batches")
    steps.append(f"prove {plan.before.name} (retry every {plan.gates.retry_interval_s}s, up to {plan.gates.timeout_s}s)")
    if plan.drain and plan.drain.enabled:
        steps.append(f"undrain the hosts proven ({plan.drain.undrain.name}); hosts not proven stay drained (exit 5)")
    if plan.on_failure == "halt":
        steps.append("hosts that fail within a wave's budget stay drained for an operator")
    else:
        steps.append("hosts that fail within a wave's budget are rolled back the same way, and the rollout goes on")
    return steps
