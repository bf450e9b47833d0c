"""The package's shape, checked from its imports: imports follow the data flow (commands -> rollout -> evaluate ->
collect -> transport / collectors -> model), no two modules import each other in a circle, command modules never
import one another, and only the run store knows the run directory's layout."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cli" / "fabricproof"

#: Layer of each top-level module or sub-package (`__init__`: the package itself, which holds only the version),
#: lowest first: a module may import from a lower layer, or from
#: its own sub-package, and nothing else. A new module must be given its layer here.
LAYERS: dict[str, int] = {
    # plain data, vocabularies and file plumbing
    "__init__": 0, "model": 0, "errors": 0, "timeutil": 0, "paths": 0, "toolpath": 0, "judging.ops": 0,
    "judging.pointer": 0, "platforms": 0, "actions": 0, "words": 0, "judging.drift": 0, "redact": 0, "textsafe": 0,
    "tools": 0, "xids": 0,  # the Xid policy defaults (plain data)
    "subnet": 0, "subnet.model": 0,  # the InfiniBand fabric between nodes as one vantage point sees it (plain data)
    "subnet.checks": 0, "subnet.names": 1,  # the subnet.* check ids; how operators name fabric ports
    "subnet.capture": 2,  # a plan document from a fabric as it is
    "subnet.plan": 2, "subnet.diff": 3,  # the cabling plan (reads documents); the fabric against it
    # the probes package: pure specs, figures, pairing and scripts; the guard speaks the collectors' not-run words;
    # the runner is a collection of its own; the options read into its settings
    "probes": 0, "probes.spec": 0, "probes.figures": 0, "probes.pairing": 0, "probes.rendezvous": 0,
    "probes.isolation": 0,  # the collective search (pure)
    "probes.isolation_sim": 1,  # a modelled fleet driving the search (pure; above the search it runs)
    "judging.packing": 1,  # how a fleet-sized evaluation holds what it keeps (the memory seam; it spills model.Result)
    "documents": 1, "slurm": 1, "judging.findings": 1, "spool": 1,
    "fsutil": 1,  # raises InputError for bad targets
    # readers: tool output -> facts fragments, baselines, run directories
    "config": 2, "starter": 2, "collectors": 2, "breaker": 2, "runstore": 2, "judging.baseline": 2, "capture": 2,
    "cache": 2,  # JSON documents kept between runs, owner-only, under a key made from their inputs
    "judging.catalog": 3, "facts": 3, "transport": 3, "probes.guard": 3,
    "invcache": 1,  # which inventories ansible-inventory's answers may be kept for, and under what key
    "inventory": 3,  # reads inventories through ansible-inventory, or its answer kept in the cache
    "subnet.hosts": 1,  # the fabric's reading of the inventory: the vantage host, each host's rail map
    "collect": 4, "factschema": 4, "probes.runner": 4,
    "probes.collective": 4,  # a collective launched by srun/mpirun, the search's runner (parsers, Slurm's words)
    "probes.collective_section": 5,  # a collective run as the report's section (pure; above the run it reads)
    "subnet.step": 5,  # the fabric step of a run: vantage, the fabric read once, its diff, each host's /subnet facts
    "judging.projection": 5, "reporters": 5, "probes.options": 5,
    "judging.evaluate": 6,
    "judging": 6,  # the package's own __init__
    "judging.pipeline": 7,  # the one call: collect -> evaluate -> reports (validate, check, the gates, the soak)
    "rollout": 8,
    "rollout.store": 2, "rollout.stepid": 0,  # the rollout run directory's layout; step ids (plain data)
    "schemagen": 9,  # writes the schemas from every registry, the rollout's policies included
    "commands": 10,
    "cli": 11, "__main__": 12,
}


@pytest.fixture(autouse=True, scope="module")
def _parsed_once():
    """The package's syntax trees live while this file's tests run, not for the rest of the worker's tests: ~300
    modules of trees left in memory make every later full collection of the cyclic GC walk them."""
    yield
    _tree.cache_clear()
    _edges.cache_clear()


@cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for the whole file: each parametrized case walks every module, and
    parsing them all again took ~1.3 CPU-s a case. The tests only read the trees."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        yield ".".join(parts), path


def _imports(dotted: str, path: Path) -> Iterator[str]:
    """Every fabricproof module `dotted` imports, as a dotted path inside the package (at any depth: lazy
    imports inside functions count too)."""
    package = dotted.split(".")[:-1] if path.name != "__init__.py" else dotted.split(".")[:-1]
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.split(".")[0] == "fabricproof":
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:  # `from . import collect` names a module; `from .x import y` names x
                sub = [*target, alias.name]
                is_module = (PACKAGE.joinpath(*sub).with_suffix(".py").is_file()
                             or PACKAGE.joinpath(*sub, "__init__.py").is_file())
                yield ".".join(sub if is_module else target) or "__init__"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "fabricproof":
                    yield ".".join(alias.name.split(".")[1:]) or "__init__"


def _top(dotted: str) -> str:
    """The unit a module is layered as: the most specific entry of LAYERS naming it (`judging.catalog` for
    `judging.catalog`; `rollout` for `rollout.waves`), since a package may hold modules of several layers."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return ".".join(parts[:n])
    return parts[0]


@cache
def _edges() -> list[tuple[str, str]]:
    """Every import between two package modules. Made when a test first asks, not at import: every xdist worker
    collects this file, and parsing the whole package cost each ~1.1 CPU-s before it ran a single test."""
    return sorted({(m, t) for m, p in _modules() for t in _imports(m, p) if t != m})


def test_every_module_has_a_layer():
    missing = sorted({_top(m) for m, _ in _modules()} - LAYERS.keys())
    assert not missing, f"give these modules a layer in LAYERS: {missing}"


def test_imports_follow_the_data_flow():
    wrong = [f"{a} -> {b}" for a, b in _edges()
             if _top(a) != _top(b) and LAYERS.get(_top(a), 99) <= LAYERS.get(_top(b), 99)]
    assert not wrong, "imports against the layers (a module imports only from lower layers):\n" + "\n".join(wrong)


def test_no_modules_import_each_other_in_a_circle():
    graph: dict[str, set[str]] = {}
    for a, b in _edges():
        if _top(a) != _top(b):
            graph.setdefault(_top(a), set()).add(_top(b))
    seen: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                cycle.extend([*stack[stack.index(nxt):], nxt])
                return True
            if nxt not in seen and visit(nxt, [*stack, nxt]):
                return True
        seen[node] = 2
        return False

    for start in sorted(graph):
        if start not in seen and visit(start, [start]):
            break
    assert not cycle, " -> ".join(cycle)


def test_command_modules_never_import_one_another():
    """Commands parse options, call the library and render; what they share lives in commands/_*.py helpers."""
    wrong = [f"{a} -> {b}" for a, b in _edges() if a.startswith("commands.") and b.startswith("commands.")
             and not b.split(".")[-1].startswith("_") and b != "commands"]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", ["run.json", "meta.json", "report.json"])
def test_only_the_run_store_knows_the_run_directory_layout(name):
    """The layout's file names appear in the run store alone; everyone else asks it (RunStore paths)."""
    speaking = sorted(str(p.relative_to(PACKAGE)) for _, p in _modules()
                      if p.name != "runstore.py" and f'"{name}"' in p.read_text(encoding="utf-8"))
    assert not speaking, f"{name} spelled outside runstore.py: {speaking}"


#: The rollout run directory's names (rollout/store.py): files and directories spelled in full, the prefixes of
#: numbered ones (attempt-3, rollback-1, decisions.jsonl.torn-2), and common words that name a directory there.
ROLLOUT_FILES = ["state.json", "decisions.jsonl", "rollout.html", "abort-requested", "runbook.json", "evidence.tar.gz"]
ROLLOUT_PREFIXES = ["attempt-", "sample-", "rollback-", "in-doubt-", ".torn-"]
ROLLOUT_DIRS = ["inputs", "ansible", "waves", "steps", "start", "gate", "soak", "pre-gate", "post-gate", "apply-failed",
                "probes"]
#: Calls whose arguments are path parts.
_PATH_CALLS = {"Path", "private_dir", "joinpath", "evidence_dir", "wave_dir", "rollback_dir", "with_name"}
ROLLOUT_STORE = "rollout/store.py"


@cache
def _path_literals(path: Path) -> tuple[tuple[str, bool], ...]:
    """(text, is a path part) of every string literal of a module: an f-string by its leading text; a path part is
    an operand of `/` or an argument of a call (Path(...), private_dir(...), joinpath(...)). Once a module: each of
    the layout's 22 names reads them all."""
    return tuple(_literals(_tree(path)))


def _literals(tree: ast.Module) -> Iterator[tuple[str, bool]]:
    parts: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts.update(id(n) for n in (node.left, node.right))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in _PATH_CALLS:
            parts.update(id(n) for n in node.args)
    inner = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inner:
            yield node.value, id(node) in parts
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            yield str(node.values[0].value), id(node) in parts


def _spells(path: Path, name: str) -> bool:
    for text, is_part in _path_literals(path):
        if name in ROLLOUT_FILES and text == name:
            return True
        if name in ROLLOUT_PREFIXES and text.startswith(name) and (text != name or is_part or name.endswith("-")):
            return True
        if name in ROLLOUT_DIRS and text == name and is_part:
            return True
    return False


@pytest.mark.parametrize("name", ROLLOUT_FILES + ROLLOUT_PREFIXES + ROLLOUT_DIRS)
def test_only_the_rollout_store_knows_the_rollout_run_directory_layout(name):
    """The rollout run directory's names are spelled in the rollout store alone; every other module asks it
    (RolloutStore paths). Common words are checked where rollout runs are handled, and only as path parts."""
    scope = [(m, p) for m, p in _modules() if name not in ROLLOUT_DIRS or m.split(".")[0] in ("rollout", "commands")]
    speaking = sorted(str(p.relative_to(PACKAGE)) for _, p in scope
                      if str(p.relative_to(PACKAGE)) != ROLLOUT_STORE and _spells(p, name))
    assert not speaking, f"{name} spelled outside {ROLLOUT_STORE}: {speaking}"


#: The product modules that start the emulated lab: the `lab` command group and the demo. Nothing else of the
#: product may import the lab, so the core never depends on the emulator that tests it.
LAB_USERS = {"commands.lab", "commands.demo"}


def _imports_the_lab(path: Path) -> bool:
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == LAB:
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == LAB for a in node.names):
            return True
    return False


LAB = "fabricproof_lab"


def test_the_lab_is_outside_the_product():
    """The lab is a sibling package of the same distribution: only the commands that start it import it."""
    assert (PACKAGE.parent / LAB / "__init__.py").is_file()
    assert not (PACKAGE / "lab").exists(), "the lab lives beside the product, in cli/fabricproof_lab"
    wrong = sorted(m for m, p in _modules() if m not in LAB_USERS and _imports_the_lab(p))
    assert not wrong, f"product modules importing the lab: {wrong}"
    assert all(_imports_the_lab(p) for m, p in _modules() if m in LAB_USERS), "the lab's users moved: update LAB_USERS"


#: The probes package's own machinery: the idle guard, the rendezvous and the pairing are the runner's, reached
#: through it (and the options) by everyone else.
PROBE_INTERNALS = {"probes.guard", "probes.rendezvous", "probes.pairing"}


def test_the_probe_runner_alone_uses_the_guard_the_rendezvous_and_the_pairing():
    assert PROBE_INTERNALS | {"probes.runner"} <= {m for m, _ in _modules()}, "the probes package moved: update this"
    wrong = [f"{a} -> {b}" for a, b in _edges() if b in PROBE_INTERNALS and not a.startswith("probes.")]
    assert not wrong, "\n".join(wrong)


def _declares_collectors(path: Path) -> bool:
    return any(isinstance(t, ast.Name) and t.id == "COLLECTORS" for n in ast.walk(_tree(path))
               if isinstance(n, ast.Assign) for t in n.targets)


def test_probe_parsers_stay_among_the_collectors():
    """collectors/probes holds the parsers and what they share (each module declares COLLECTORS or serves one that
    does), never how probes run; the probes package declares no collector, and no collector imports it."""
    mods = {m: p for m, p in _modules() if m.startswith("collectors.probes.") and p.name != "__init__.py"}
    parsers = {m for m, p in mods.items() if _declares_collectors(p)}
    stray = sorted(set(mods) - parsers - {b for a, b in _edges() if a in parsers})
    assert not stray, f"not parsers: move them into the probes package: {stray}"
    declaring = sorted(m for m, p in _modules() if m.startswith("probes.") and _declares_collectors(p))
    assert not declaring, f"a probe's collector (its parser) belongs in collectors/probes: {declaring}"
    wrong = [f"{a} -> {b}" for a, b in _edges() if a.startswith("collectors.") and _top(b).startswith("probes")]
    assert not wrong, "\n".join(wrong)


def test_a_figure_is_written_and_read_in_one_place():
    """Figures keep their type through rollout state: only Figure.to_dict/from_dict spell a figure row's keys."""
    speaking = sorted(str(p.relative_to(PACKAGE)) for _, p in _modules()
                      if p.name != "figures.py" and '"higher_is_better"' in p.read_text(encoding="utf-8"))
    assert not speaking, f"figure rows built outside probes/figures.py: {speaking}"


#: Modules that judge facts without the pipeline: the lab tour, whose table shows no report time or version.
JUDGES_ALONE = {"commands.demo"}
PIPELINE_USERS = {"commands.validate", "commands.check", "rollout.gate", "rollout.soak"}


def _evaluates(path: Path) -> list[str]:
    """The names of the evaluation a module imports that judge facts (evaluate, StreamingEvaluation)."""
    return [alias.name for node in ast.walk(_tree(path))
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("judging.evaluate")
            for alias in node.names if alias.name in ("evaluate", "StreamingEvaluation")]


def test_collect_evaluate_and_report_is_one_call():
    """validate, check --local, the rollout gates and the soak go through judging.pipeline.run; only the judging
    package itself calls the evaluation directly."""
    wrong = sorted(f"{m}: {names}" for m, p in _modules()
                   if not m.startswith("judging.") and m not in JUDGES_ALONE and (names := _evaluates(p)))
    assert not wrong, "judge through judging.pipeline.run, not the evaluation directly:\n" + "\n".join(wrong)
    users = {a for a, b in _edges() if b == "judging.pipeline"}
    assert PIPELINE_USERS <= users, f"not through the pipeline: {sorted(PIPELINE_USERS - users)}"


TOOLS_OWNER = "tools"
#: Probes build their argv from the host's baseline values (probes/spec.py), not from a fixed table; their parsers'
#: default argv (collectors/probes) and the idle guard's query (probes/guard.py) belong to the probes.
BUILT_ARGV = ("collectors.probes", "probes.")


def _spelled_argvs(path: Path) -> list[int]:
    """Lines where a module writes a tool's argv itself: `argv=("tool", ...)` or `guarded(requires, "tool", ...)`;
    an `sh -c` script the collector owns is its own code, not a tool invocation."""
    lines = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Call):
            continue
        spelled = [kw.value for kw in node.keywords if kw.arg == "argv" and isinstance(kw.value, ast.Tuple)]
        if getattr(node.func, "id", getattr(node.func, "attr", "")) == "guarded":
            spelled.append(ast.Tuple(elts=node.args[1:]))
        for tup in spelled:
            first = tup.elts[0] if tup.elts else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value != "sh":
                lines.append(node.lineno)
    return lines


def test_the_tools_vocabulary_alone_spells_tool_argvs_and_durations():
    """Each tool's argv and duration are written once, in tools.py: collectors take theirs from it, the registry
    times them by it, and the lab's command table and latency are derived from it."""
    from fabricproof import tools
    from fabricproof.collectors import COLLECTORS

    assert not (PACKAGE / "durations.py").exists(), "durations live in tools.py"
    spelled = [f"{m}:{line}" for m, p in _modules() if m != TOOLS_OWNER and not m.startswith(BUILT_ARGV)
               for line in _spelled_argvs(p)]
    assert not spelled, f"tool argvs written outside tools.py: {spelled}"
    speaking = sorted(m for m, p in _modules() if m != TOOLS_OWNER and any(
        isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) in ("Duration", "Tool")
        or isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "QUERY_GPU_FIELDS" for t in n.targets)
        for n in ast.walk(_tree(p))))
    assert not speaking, f"durations or the --query-gpu fields written outside tools.py: {speaking}"
    for cid, c in COLLECTORS.items():
        if cid in tools.TOOLS:
            assert c.tool_argv == tools.TOOLS[cid].argv, f"{cid} runs another tool's argv than its own record"
        else:
            assert c.fabric_scope or c.loads_fabric or c.tool_argv[0] == "sh", \
                f"{cid}: give its tool a record in tools.TOOLS"
    assert set(tools.TOOLS) <= set(COLLECTORS), "a tool record names no collector"
