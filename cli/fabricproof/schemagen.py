"""Write the committed schemas from the Python vocabularies: `python -m fabricproof.schemagen [--check]`."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import actions, factschema, platforms, transport
from .judging import catalog
from .model import Outcome, Scope, Severity
from .judging.ops import OPERATORS, Kind, fleet_names, names
from .paths import schemas_dir
from .judging.pointer import split_pointer
from .reporters import REPORTERS
from .rollout.gates import plan_schemas
from .rollout.plan import POLICIES
from .subnet.model import SPEEDS, WIDTHS

COMMAND = "python -m fabricproof.schemagen"
FACTS = "facts.schema.json"


@dataclass(frozen=True)
class Vocabulary:
    """One enum the schemas share with Python: its values come from `source`, never from the schema file."""

    source: str  # where it is declared, named in the generated $comment
    description: str
    values: Callable[[], Sequence[Any]]  # read at generation time, so a registry changed in a test is seen


def _fact_values(pointer: str) -> Callable[[], list[Any]]:
    """The values the facts schema allows at a pointer, null aside: a baseline expects one of the values a
    collector reports."""

    def values() -> list[Any]:
        node = factschema.build()
        for seg in split_pointer(pointer):
            node = node["items"] if seg == "*" else node["properties"][seg]
        return [v for v in node["enum"] if v is not None]

    return values


def _from_facts(pointer: str, description: str) -> Vocabulary:
    return Vocabulary(f"the facts schema at {pointer} (the collectors)", description, _fact_values(pointer))


VOCABULARIES: dict[str, Vocabulary] = {
    "severity": Vocabulary("fabricproof.model.Severity", "How bad a failed check is: critical fails the node and "
                           "stops a rollout; warning flags it for the operator; info is for the record.",
                           lambda: [s.value for s in Severity]),
    "scope": Vocabulary("fabricproof.model.Scope", "host: judged per host; fleet: hosts compared with each other.",
                        lambda: [s.value for s in Scope]),
    "outcome": Vocabulary("fabricproof.model.Outcome", "The outcome of one check on one host.",
                          lambda: [o.value for o in Outcome]),
    "action": Vocabulary("fabricproof.actions.ACTIONS", "What an operator does about a failed check, least "
                         "disruptive first: " + "; ".join(f"{a.id}: {a.meaning}" for a in actions.ACTIONS.values()),
                         lambda: list(actions.ACTIONS)),
    "platform": Vocabulary("fabricproof.platforms.PLATFORMS", "A GPU platform.", lambda: list(platforms.PLATFORMS)),
    "family": Vocabulary("fabricproof.judging.catalog.FAMILIES", "A check family: one folder of the catalog.",
                         lambda: list(catalog.FAMILIES)),
    "operator": Vocabulary("fabricproof.judging.ops.OPERATORS", "Every assertion operator.", lambda: list(names())),
    "value_operator": Vocabulary("fabricproof.judging.ops.OPERATORS (kinds comparison and match)",
                                 "Operators that judge each value on its own.",
                                 lambda: list(names(Kind.COMPARISON, Kind.MATCH))),
    "comparison_operator": Vocabulary("fabricproof.judging.ops.OPERATORS (kind comparison)",
                                      "Operators that compare a value with expected (count compares its number).",
                                      lambda: list(names(Kind.COMPARISON))),
    "fleet_operator": Vocabulary("fabricproof.judging.ops.OPERATORS (fleet)", "Operators that compare hosts with each "
                                 "other: the only ones a fleet-scope check uses.", lambda: list(fleet_names())),
    "operator_taking_expected": Vocabulary("fabricproof.judging.ops.OPERATORS (takes_expected)",
                                           "Operators that need an expected value.",
                                           lambda: [n for n, o in OPERATORS.items() if o.takes_expected]),
    "reporter": Vocabulary("fabricproof.reporters.REPORTERS", "A report format.", lambda: list(REPORTERS)),
    "transport": Vocabulary("fabricproof.transport.TRANSPORTS", "A transport of the registry: how commands reach "
                            "the hosts.", lambda: list(transport.TRANSPORTS)),
    "failure_policy": Vocabulary("fabricproof.rollout.plan.POLICIES", "What a rollout does when a wave fails.",
                                 lambda: list(POLICIES)),
    "link_width": Vocabulary("fabricproof.subnet.model.WIDTHS", "An InfiniBand link width, narrowest first.",
                             lambda: list(WIDTHS)),
    "link_speed": Vocabulary("fabricproof.subnet.model.SPEEDS", "An InfiniBand link speed, slowest first.",
                             lambda: list(SPEEDS)),
    "kernel_module": _from_facts("/driver/kernel_module", "NVIDIA kernel module flavour."),
    "persistence_mode": _from_facts("/gpu/gpus/*/persistence_mode", "GPU persistence mode."),
    "ecc_mode": _from_facts("/gpu/gpus/*/ecc_mode", "GPU ECC mode."),
    "throttle_reason": _from_facts("/gpu/gpus/*/throttle_reasons/*", "A clock throttle reason as nvidia-smi reports it."),
    "iommu_mode": _from_facts("/kernel/cmdline/iommu", "IOMMU mode selected by the kernel command line."),
}

#: The $defs each hand-written schema takes from VOCABULARIES. Each vocabulary appears in a file once, as
#: #/$defs/<name>; the file's other parts refer to it with $ref.
USES: dict[str, tuple[str, ...]] = {
    "baseline.schema.json": ("platform", "persistence_mode", "ecc_mode", "throttle_reason", "kernel_module",
                             "iommu_mode"),
    "fabricplan.schema.json": ("link_width", "link_speed"),
    "check.schema.json": ("family", "severity", "action", "scope", "platform", "operator", "value_operator",
                          "comparison_operator", "operator_taking_expected", "fleet_operator"),
    "report.schema.json": ("outcome", "severity", "action"),
    "rollout.schema.json": ("severity", "reporter", "failure_policy"),
    "runbook.schema.json": ("severity",),
    "run.schema.json": ("transport",),
}


#: $defs a registry writes whole, by file: name -> where it comes from and the function giving every entry.
REGISTRY_DEFS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "rollout.schema.json": ("fabricproof.rollout.gates.GATES (each gate kind's plan block)", plan_schemas),
}


class SchemaGenError(ValueError):
    """A schema lacks a $defs entry the generator fills, or a schema file is missing."""


def definition(name: str) -> dict[str, Any]:
    """The $defs entry of one vocabulary as the generator writes it."""
    vocab = VOCABULARIES[name]
    return {"$comment": f"Generated from {vocab.source} by `{COMMAND}`: edit it there, not here.",
            "description": vocab.description, "enum": list(vocab.values())}


def fill(file: str, text: str) -> str:
    """The text of a hand-written schema with its vocabulary $defs filled in, every other byte kept."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaGenError(f"schemas/{file}:{exc.lineno}: not JSON: {exc.msg}") from None
    for name in USES.get(file, ()):
        try:
            start, end = _span(text, ("$defs", name))
        except KeyError:
            raise SchemaGenError(f"schemas/{file} has no $defs/{name}: add one (any value) and run {COMMAND}") from None
        text = text[:start] + _render(definition(name), text, start, end) + text[end:]
    if file in REGISTRY_DEFS:
        source, make = REGISTRY_DEFS[file]
        for name, value in make().items():
            try:
                start, end = _span(text, ("$defs", name))
            except KeyError:
                raise SchemaGenError(f"schemas/{file} has no $defs/{name}: add one (any value) and run "
                                     f"{COMMAND}") from None
            value = {"$comment": f"Generated from {source} by `{COMMAND}`: edit it there, not here.", **value}
            text = text[:start] + _render(value, text, start, end) + text[end:]
    return text


def generate(directory: Path | None = None) -> dict[str, str]:
    """Every schema file under directory (default: the shipped schemas) as the generator writes it."""
    root = directory or schemas_dir()
    missing = sorted(name for name in USES if not (root / name).is_file())
    if missing:
        raise SchemaGenError(f"no {', '.join(missing)} in {root}")
    out = {p.name: fill(p.name, p.read_text(encoding="utf-8")) for p in sorted(root.glob("*.schema.json"))}
    out[FACTS] = factschema.render()
    return out


def stale(directory: Path | None = None) -> dict[str, str]:
    """File name -> the start of a diff from the committed file to the generated one, for every file that differs."""
    root = directory or schemas_dir()
    return _diffs(root, generate(root))


def _diffs(root: Path, generated: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, want in generated.items():
        path = root / name
        have = path.read_text(encoding="utf-8") if path.is_file() else ""
        if have != want:
            diff = difflib.unified_diff(have.splitlines(), want.splitlines(), f"schemas/{name}", "generated",
                                        lineterm="", n=1)
            out[name] = "\n".join(list(diff)[:40])
    return out


# --------------------------------------------------------------------------------- text surgery


_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _span(text: str, keys: Sequence[str]) -> tuple[int, int]:
    """Start and end offsets of the value at a path of object keys, found without re-serialising the file."""
    pos = _skip_ws(text, 0)
    for key in keys:
        if text[pos] != "{":
            raise KeyError(key)
        pos = _skip_ws(text, pos + 1)
        while True:
            if text[pos] != '"':
                raise KeyError(key)
            name, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            pos = _skip_ws(text, _skip_ws(text, pos) + 1)  # past the ':'
            if name == key:
                break
            _, pos = _DECODER.raw_decode(text, pos)
            pos = _skip_ws(text, pos)
            if text[pos] != ",":
                raise KeyError(key)
            pos = _skip_ws(text, pos + 1)
    _, end = _DECODER.raw_decode(text, pos)
    return pos, end


def _render(value: Any, text: str, start: int, end: int) -> str:
    """JSON for value in the layout of the text it replaces: on one line where the file writes the entry on one
    line (the compact, hand-laid schemas), else indented by two from the entry's line, as json.dumps(indent=2)."""
    if "\n" not in text[start:end]:
        return json.dumps(value)
    line = text[text.rfind("\n", 0, start) + 1:start]
    indent = line[:len(line) - len(line.lstrip(" "))]
    return json.dumps(value, indent=2).replace("\n", "\n" + indent)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument("--check", action="store_true", help="Write nothing; exit 1 naming every stale schema.")
    parser.add_argument("--dir", type=Path, default=None, help="Schema directory (default: the shipped schemas).")
    args = parser.parse_args(argv)
    root = args.dir or schemas_dir()
    try:
        generated = generate(root)
    except SchemaGenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    differ = _diffs(root, generated)
    if args.check:
        for name, diff in differ.items():
            print(f"schemas/{name} is stale: run `{COMMAND}`\n{diff}", file=sys.stderr)
        return 1 if differ else 0
    for name in differ:
        (root / name).write_text(generated[name], encoding="utf-8")
        print(f"wrote {root / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
