"""The package's shape, checked from its imports: imports follow the data flow (commands -> rollout -> evaluate ->
collect -> transport / collectors -> model), no two modules import each other in a circle, command modules never
import one another, and only the run store knows the run directory's layout."""

from __future__ import annotations

import ast
from collections.abc import Iterator
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
    "pairing": 0, "durations": 0, "xids": 0,  # the Xid policy defaults (plain data)
    "documents": 1, "inventory": 1, "slurm": 1, "judging.findings": 1, "spool": 1,
    "fsutil": 1,  # raises InputError for bad targets
    # readers: tool output -> facts fragments, baselines, run directories
    "config": 2, "starter": 2, "collectors": 2, "breaker": 2, "runstore": 2, "judging.baseline": 2, "capture": 2,
    "judging.catalog": 3, "facts": 3, "transport": 3,
    "collect": 4, "factschema": 4,
    "judging.projection": 5, "reporters": 5,
    "judging.evaluate": 6,
    "judging": 6,  # the package's own __init__
    "rollout": 7,
    "rollout.store": 2, "rollout.stepid": 0,  # the rollout run directory's layout; step ids (plain data)
    "schemagen": 8,  # writes the schemas from every registry, the rollout's policies included
    "commands": 9,
    "cli": 10, "__main__": 11,
}


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        yield ".".join(parts), path


def _imports(dotted: str, path: Path) -> Iterator[str]:
    """Every fabricproof module `dotted` imports, as a dotted path inside the package (at any depth: lazy
    imports inside functions count too)."""
    package = dotted.split(".")[:-1] if path.name != "__init__.py" else dotted.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


EDGES = sorted({(m, t) for m, p in _modules() for t in _imports(m, p) if t != m})


def test_every_module_has_a_layer():
    missing = sorted({_top(m) for m, _ in _modules()} - LAYERS.keys())
    assert not missing, f"give these modules a layer in LAYERS: {missing}"


def test_imports_follow_the_data_flow():
    wrong = [f"{a} -> {b}" for a, b in EDGES
             if _top(a) != _top(b) and LAYERS.get(_top(a), 99) <= LAYERS.get(_top(b), 99)]
    assert not wrong, "imports against the layers (a module imports only from lower layers):\n" + "\n".join(wrong)


def test_no_modules_import_each_other_in_a_circle():
    graph: dict[str, set[str]] = {}
    for a, b in EDGES:
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
    wrong = [f"{a} -> {b}" for a, b in EDGES if a.startswith("commands.") and b.startswith("commands.")
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


def _path_literals(path: Path) -> Iterator[tuple[str, bool]]:
    """(text, is a path part) of every string literal of a module: an f-string by its leading text; a path part is
    an operand of `/` or an argument of a call (Path(...), private_dir(...), joinpath(...))."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
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
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
