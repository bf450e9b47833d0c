"""`fabricproof baseline`: lint a baseline, show what a host gets from it, or capture one from a known-good node."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from ..judging import baseline as baseline_mod
from .. import config, documents
from .. import inventory as inventory_mod
from .. import facts as facts_mod
from .. import inventory as inventory_mod
from ..capture import capture as capture_values
from ..errors import InputError
from ..fsutil import check_target, write_target
from ..timeutil import utc_now
from ._common import BASELINE_HELP, INVENTORY_DEFAULT, console, err_console, input_errors, shown

app = typer.Typer(help="Baselines: the expected fabric state of a fleet, per inventory group.", no_args_is_help=True)


def _count_leaves(d: object) -> int:
    return sum(_count_leaves(v) for v in d.values()) if isinstance(d, dict) else 1


@app.command("lint")
@input_errors
def lint(
    file: Annotated[Path, typer.Argument(help="Baseline YAML to check against schemas/baseline.schema.json.")],
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Also check that every spec.groups key names a group of this Ansible inventory.")] = None,
) -> None:
    """Validate a baseline: YAML syntax, schema, unknown keys (typos), duplicate keys, and with -i group names
    the inventory does not have. Exit 2 with file:line on error.

    Example: fabricproof baseline lint inventories/dgx-h100/baseline.yaml -i inventory.yml
    """
    b = baseline_mod.load(file)
    if inventory:
        baseline_mod.check_groups(b, inventory_mod.load(inventory).groups, inventory)
    groups = ", ".join(f"{g} ({_count_leaves(v)} values)" for g, v in sorted(b.groups.items())) or "none"
    console.print(f"{file}: ok — baseline {b.name!r}, {_count_leaves(b.defaults)} default values; group overrides: {groups}",
                  markup=False, soft_wrap=True)


@app.command("show")
@input_errors
def show(
    host: Annotated[str, typer.Option("--host", help="The host whose baseline values to show.", show_default=False)],
    baseline: Annotated[Path | None, typer.Option("--baseline", "-b", help=BASELINE_HELP, show_default=False)] = None,
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Inventory the host's groups come from."
                                                  + INVENTORY_DEFAULT)] = None,
    group: Annotated[list[str], typer.Option("--group", "-g", help="A group of the host, besides the inventory's "
                                             "(or instead of an inventory). Repeatable.")] = [],  # noqa: B006
    fmt: Annotated[str, typer.Option("--format", "-f", help="text (one value a line, with the group it came from) "
                                     "or json.")] = "text",
) -> None:
    """Print the merged baseline a host gets: spec.defaults, then each of its groups' overrides, every value with
    where it came from.

    Example: fabricproof baseline show --host h100-0001 -i inventory.yml -b baseline.yaml
    """
    if fmt not in ("text", "json"):
        raise InputError(f"--format {fmt!r}: choose text or json")
    base = baseline_mod.load(config.baseline(baseline))
    inventory = config.inventory(inventory)
    if inventory is None and not group:
        raise InputError("--host needs the host's groups: give --inventory/-i (or set a default: `fabricproof "
                         "config`), or --group")
    groups = set(group)
    if inventory is not None:
        inv = inventory_mod.load(inventory)
        if host not in inv.hosts:
            names = sorted(inv.hosts)
            raise InputError(f"--host {host!r}: not in the inventory {inventory} (hosts: {', '.join(names[:10])}"
                             f"{', ...' if len(names) > 10 else ''})")
        groups |= set(inv.hosts[host].groups)
    values, sources = base.for_groups(groups), base.sources(groups)
    applied = sorted(groups & base.groups.keys())
    if fmt == "json":
        doc = {"host": host, "baseline": base.source, "groups": sorted(groups), "applied_groups": applied,
               "values": values, "sources": sources}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    console.print(f"# {shown(base.source)} for {shown(host)}: defaults"
                  + "".join(f", then groups.{shown(g)}" for g in applied)
                  + f" (host groups: {shown(', '.join(sorted(groups)) or 'none')})", soft_wrap=True, highlight=False)
    rows = [(dotted, json.dumps(baseline_mod.lookup(values, dotted)), source) for dotted, source in sources.items()]
    # One column for the sources, but a long list does not push every comment away.
    width = min(max((len(d) + len(v) + 2 for d, v, _ in rows), default=0), 60)
    for dotted, value, source in rows:
        console.print(shown(f"{dotted}: {value}".ljust(width) + f"  # {source}"), soft_wrap=True, highlight=False)


@app.command("capture")
@input_errors
def capture(
    facts: Annotated[Path, typer.Option("--facts", help="Directory of facts (or a run directory).", show_default=False)],
    host: Annotated[str, typer.Option("--host", help="The golden node whose facts become the baseline.", show_default=False)],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="metadata.name of the baseline (default: captured-<host>).")] = None,
) -> None:
    """Write a baseline from a known-good node: what its facts prove becomes the expectation for its peers.

    Review it before use: a golden node with a latent fault would pin the fault.

    Example: fabricproof baseline capture --facts runs/last --host h100-0001 -o baseline.yaml
    """
    if output:
        check_target(output, "--output")
    all_facts = facts_mod.load_dir(facts)
    if host not in all_facts:
        raise InputError(f"--host {host!r}: no facts for that host in {facts} (hosts: {', '.join(sorted(all_facts)[:10])})")
    values = capture_values(all_facts[host])
    doc = {
        "apiVersion": "fabricproof/v1",
        "kind": "Baseline",
        "metadata": {"name": name or f"captured-{host}", "captured_from": host, "captured_at": utc_now(),
                     "description": f"Captured from golden node {host}; review before use."},
        "spec": {"defaults": values},
    }
    text = "# Captured by `fabricproof baseline capture`; review every value before trusting it.\n" + yaml.safe_dump(doc, sort_keys=False)
    documents.validate(documents.parse_yaml(text, str(output or "<captured>")), "baseline")
    if output:
        write_target(output, (text,), mode=0o644, option="--output")  # configuration, committed and shared
        err_console.print(f"wrote baseline with {_count_leaves(values)} values to {output}")
    else:
        typer.echo(text, nl=False)
