"""`fabricproof fabric`: the InfiniBand fabric against its cabling plan: capture a plan from a fabric proven good,
diff the fabric against a plan, import a plan from a cabling CSV."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
import yaml

from .. import config, transport
from ..collect import DEFAULT_FORKS, DEFAULT_HOST_TIMEOUT_S, check_settings, collect, new_run_id, select_collectors, \
    select_hosts
from ..collect.fabric import collect_fabric
from ..errors import InputError
from ..fsutil import check_target, write_target
from ..judging import baseline as baseline_mod
from ..judging import catalog
from ..judging.pipeline import Live, Request, run
from ..model import ExitCode
from ..reporters import REPORTERS
from ._common import (FORMAT_HELP, INVENTORY_DEFAULT, SEVERITIES, check_fail_on, emit_report, err_console,
                      input_errors, pair_outputs, shown)
from . import _fabric
from ._progress import ProgressView

app = typer.Typer(help="The InfiniBand fabric against its cabling plan (kind: FabricPlan).", no_args_is_help=True)

#: The host collector the fabric commands run on every host: its ports name the vantage when none is declared, and
#: its HCAs give each host's rail map.
HOST_COLLECTORS = ("ibstat",)
SUBNET_FAMILY = "subnet"

InventoryOpt = Annotated[str | None, typer.Option("--inventory", "-i", help="Ansible inventory: its hosts' cables are "
                                                  "judged; the vantage is the host with fabricproof_fabric_vantage: "
                                                  "true (or in group fabric_vantage)." + INVENTORY_DEFAULT)]
LimitOpt = Annotated[str | None, typer.Option("--limit", "-l", help="Ansible host pattern: the hosts judged.")]
ViaOpt = Annotated[str, typer.Option("--via", help=f"How commands reach the hosts: {transport.choices(transport.LIVE)}.")]
RunDirOpt = Annotated[Path | None, typer.Option("--run-dir", help="Where the evidence goes (default runs/<run id>).")]
KeysOpt = Annotated[bool, typer.Option("--accept-new-host-keys", help="Record unknown host keys instead of refusing "
                                       "the host (never a changed key).")]


def _hosts(inventory: str | None, limit: str | None, via: str, accept_new_host_keys: bool):
    from .. import inventory as inventory_mod

    inventory = config.inventory(inventory)
    if not inventory:
        raise InputError("give --inventory (-i): the hosts whose cables are judged and the vantage among them")
    inv = inventory_mod.load(inventory)
    hosts = select_hosts(inventory, limit, via, loaded=inv)
    options = transport.configure(via, inventory_path=inventory, accept_new_host_keys=accept_new_host_keys)
    return inventory, inv, hosts, options


@app.command("capture")
@input_errors
def capture(
    output: Annotated[Path, typer.Option("--output", "-o", help="The plan file to write (YAML).", show_default=False)],
    inventory: InventoryOpt = None,
    limit: LimitOpt = None,
    via: ViaOpt = "ssh",
    run_dir: RunDirOpt = None,
    name: Annotated[str | None, typer.Option("--name", help="The plan's name (default: captured).")] = None,
    accept_new_host_keys: KeysOpt = False,
) -> None:
    """Write a cabling plan from a fabric proven good: every cable up now becomes a planned cable.

    Review it before use: a cable in the wrong place today would be planned there. The command lists what to look at
    (ports down, links below what both ends could do, descriptions naming no inventory host).

    Example: fabricproof fabric capture -i inventory.yml -o fabric-plan.yaml
    """
    from ..subnet import hosts as hosts_mod
    from ..subnet.capture import plan_from
    from ..subnet.plan import load_plan

    check_target(output, "--output")
    inventory, inv, hosts, options = _hosts(inventory, limit, via, accept_new_host_keys)
    run_id = new_run_id()
    where = run_dir or Path("runs") / run_id
    result = collect(hosts, where, via=via, options=options, collectors=select_collectors(list(HOST_COLLECTORS)),
                     run_id=run_id, inventory=inventory, limit=limit)
    vantage = hosts_mod.choose(list(inv.hosts.values()), result.facts_by_host)
    if vantage.host is None:
        err_console.print(f"fabric: {shown(vantage.why)}", soft_wrap=True, highlight=False)
        raise typer.Exit(ExitCode.INCOMPLETE)
    fabric = collect_fabric(vantage.host, where, via=via, options=options, window_s=0, run_id=run_id)
    for cid, why in fabric.errors.items():
        err_console.print(f"fabric: {cid}: {shown(why)}", soft_wrap=True, highlight=False)
    if fabric.subnet is None:
        raise typer.Exit(ExitCode.INCOMPLETE)
    names = [h.name for h in hosts]
    doc = plan_from(fabric.subnet, names, name=name or "captured")
    text = (f"# Captured by `fabricproof fabric capture` from {vantage.host.name} ({run_id}); review every cable "
            "before trusting it.\n" + yaml.safe_dump(doc, sort_keys=False, width=120))
    write_target(output, (text,), mode=0o644, option="--output")  # configuration, committed and shared
    load_plan(str(output))  # what was written is a plan the diff reads
    err_console.print(f"wrote a plan of {len(doc.get('links') or ())} cables to {shown(output)} (fabric read from "
                      f"{shown(vantage.host.name)}: {vantage.why}; evidence {shown(where)})", soft_wrap=True,
                      highlight=False)
    for line in review(fabric.subnet, names):
        err_console.print(shown(line), soft_wrap=True, highlight=False)


def review(subnet, hosts: list[str]) -> list[str]:
    """What a person checks before trusting a captured plan: it pins today's cabling, faults included."""
    from ..subnet.model import speed_rank, width_rank

    out = ["review before use:"]
    known = {h.lower() for h in hosts}
    descs = Counter(n.desc for n in subnet.nodes.values())
    for desc, n in sorted(descs.items()):
        if n > 1:
            out.append(f"  {n} nodes share the description {desc!r}: the plan cannot tell them apart")
    strangers = sorted({n.desc.split(" ")[0] for n in subnet.cas() if n.desc.split(" ")[0].lower() not in known})
    if strangers:
        out.append(f"  {len(strangers)} CA description(s) name no host of the inventory (not planned by host): "
                   + ", ".join(strangers[:10]) + (" ..." if len(strangers) > 10 else ""))
    # A switch port without a cable is normal (a 64-port leaf with 40 cabled); an HCA port down is a cable missing.
    cas = {n.guid for n in subnet.cas()}
    down = [p for p in subnet.idle_ports if p.end.guid in cas]
    if down:
        out.append(f"  {len(down)} HCA port(s) down or polling: a cable missing now is missing from the plan")
    slow = [lk for lk in subnet.links if (lk.could_width and width_rank(lk.width) < width_rank(lk.could_width))
            or (lk.could_speed and speed_rank(lk.speed) < speed_rank(lk.could_speed))]
    if slow:
        out.append(f"  {len(slow)} link(s) below what both ends could do: planned at today's width and speed")
    masters = [s for s in subnet.sms if s.state == "SMINFO_MASTER"]
    if len(masters) != 1:
        out.append(f"  {len(masters)} master SM(s) seen, not one")
    if len(out) == 1:
        out.append("  nothing stood out; still compare the cable count with the cabling sheet")
    return out


@app.command("diff")
@input_errors
def diff(
    plan: Annotated[str, typer.Option("--plan", help="The cabling plan (kind: FabricPlan).", show_default=False)],
    inventory: InventoryOpt = None,
    limit: LimitOpt = None,
    via: ViaOpt = "ssh",
    run_dir: RunDirOpt = None,
    window: _fabric.FabricWindowOpt = _fabric.DEFAULT_WINDOW_S,
    baseline: Annotated[Path | None, typer.Option("--baseline", "-b", help="A baseline, if the subnet.* checks "
                                                  "should read values of it (none do by default).")] = None,
    fmt: Annotated[list[str], typer.Option("--format", "-f", help=FORMAT_HELP.format(choices=", ".join(REPORTERS)))] = [],  # noqa: B006
    fail_on: Annotated[str, typer.Option("--fail-on", help=f"Lowest severity that makes the exit code 1: {SEVERITIES}.")] = "critical",
    accept_new_host_keys: KeysOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress.")] = False,
    forks: Annotated[int, typer.Option("--forks", help="Hosts read at once.")] = DEFAULT_FORKS,
) -> None:
    """Read the fabric once from the vantage host and judge every host's cables against the plan: the subnet.*
    checks, in the standard reports and exit codes (as `validate --fabric-plan --checks subnet.*`).

    Example: fabricproof fabric diff -i inventory.yml --plan fabric-plan.yaml -f table -f junit=fabric.xml
    """
    check_fail_on(fail_on)
    pairs = pair_outputs(fmt, [])
    base = baseline_mod.load(baseline) if baseline else baseline_mod.Baseline("none", {})
    checks = catalog.select(catalog.load(), [SUBNET_FAMILY])
    inventory, inv, hosts, options = _hosts(inventory, limit, via, accept_new_host_keys)
    loaded = _fabric.load(plan, window, inv.groups)
    check_settings(forks, DEFAULT_HOST_TIMEOUT_S, None, None)
    run_id = new_run_id()
    then = _fabric.after_collection(loaded, list(inv.hosts.values()), via, options, window, quiet, run_id)
    judged = run(Request(Live(hosts, run_dir or Path("runs") / run_id, via=via, options=options, forks=forks,
                              collectors=select_collectors(list(HOST_COLLECTORS)), inventory=inventory, limit=limit,
                              progress=ProgressView(err_console, len(hosts), quiet=quiet), then=then),
                         base, checks, groups={h.name: h.groups for h in hosts}, reports=("json",), run_id=run_id))
    err_console.print(f"evidence and report: {judged.evidence_dir}", highlight=False)
    emit_report(judged.report, pairs, judged.written)
    raise typer.Exit(judged.exit_code(fail_on))


@app.command("import-csv")
@input_errors
def import_csv(
    csv_file: Annotated[Path, typer.Argument(help="A cabling CSV: StartDevice,StartPort,EndDevice,EndPort[,LinkType] "
                                             "(the NDT form).", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="The plan file to write (YAML).", show_default=False)],
    name: Annotated[str | None, typer.Option("--name", help="The plan's name (default: the CSV's file name).")] = None,
) -> None:
    """Turn a cabling CSV into a plan (every row a planned cable); a bad row is refused with its file and line.

    Example: fabricproof fabric import-csv cabling.csv -o fabric-plan.yaml
    """
    from ..subnet.plan import load_plan, parse_csv

    check_target(output, "--output")
    if not csv_file.is_file():
        raise InputError(f"{csv_file}: not found")
    links = parse_csv(csv_file.read_text(encoding="utf-8", errors="replace"), str(csv_file))
    doc = {"kind": "FabricPlan", "version": 1, "name": name or csv_file.stem,
           "links": [{"a": lk.a.device, "a_port": lk.a.port, "b": lk.b.device, "b_port": lk.b.port,
                      **({"width": lk.width} if lk.width else {}), **({"speed": lk.speed} if lk.speed else {})}
                     for lk in links]}
    text = f"# Imported by `fabricproof fabric import-csv` from {csv_file.name}.\n" + yaml.safe_dump(
        doc, sort_keys=False, width=120)
    write_target(output, (text,), mode=0o644, option="--output")
    load_plan(str(output))
    err_console.print(f"wrote a plan of {len(doc.get('links') or ())} cables to {shown(output)}", highlight=False)
