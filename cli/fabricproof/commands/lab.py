"""`fabricproof lab`: start, inspect and stop an emulated GPU fleet behind a real sshd; inject faults."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from fabricproof_lab import manager
from fabricproof_lab.errors import LabError
from fabricproof_lab.layout import default_lab_dir
from fabricproof_lab.topology import MAX_NODES, PROFILE_CHOICES
from ..model import ExitCode
from ._common import console, err_console, shown

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    help=(
        "An emulated GPU fleet for rehearsals, game days and CI: every node a loopback address behind Debian's "
        "OpenSSH sshd, answering nvidia-smi, ibstat and friends in the real formats, changed by real playbooks."
    ),
    no_args_is_help=True,
)
fault_app = typer.Typer(help="Break lab nodes on purpose (and mend them): each fault names the checks that catch it.",
                        no_args_is_help=True)
app.add_typer(fault_app, name="fault")

DirOption = Annotated[Path | None, typer.Option(
    "--dir", "-d", envvar="FABRICPROOF_LAB_DIR", file_okay=False,
    help="Lab directory (default: /var/lib/fabricproof/lab as root, else $XDG_STATE_HOME/fabricproof/lab). "
         "Several labs run side by side in different directories.")]
FormatOption = Annotated[str, typer.Option("--format", "-f", help="text or json.")]


def _lab_dir(directory: Path | None) -> Path:
    return directory if directory is not None else default_lab_dir()


def _check_format(fmt: str) -> None:
    if fmt not in ("text", "json"):
        raise LabError(f"--format {fmt!r}: choose text or json")


def lab_errors(fn: F) -> F:
    """LabError -> one message on stderr and its exit code (2 for bad input or setup)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LabError as exc:
            err_console.print(f"[bold red]error:[/] {shown(str(exc))}", soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(ExitCode.INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


def _progress(message: str) -> None:
    err_console.print(shown(message), soft_wrap=True)


@app.command("up")
@lab_errors
def up(
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=1, max=MAX_NODES, help="How many nodes.")] = 16,
    profile: Annotated[str, typer.Option("--profile", "-p", help=f"One of {', '.join(PROFILE_CHOICES)}.")] = "dgx-h100",
    directory: DirOption = None,
    port: Annotated[int | None, typer.Option("--port", help="TCP port of every node (default: a free one).")] = None,
    node_store: Annotated[str, typer.Option(
        "--node-store", help="Where new node state lives: tmpfs (fast: 1,000 nodes in ~12 s, ~0.7 MB RAM each), "
                             "disk (inside --dir, survives reboots), or auto (tmpfs when it has room).")] = "auto",
    latency: Annotated[str, typer.Option(
        "--latency", help="How long the emulated tools take to answer: off (milliseconds) or realistic (what each "
                          "tool takes on a real 8-GPU node, slept: `nvidia-smi -q` 0.6 s, `nvfwupd show_version` "
                          "20 s...; sources in fabricproof/tools.py). A running lab takes a new value in place.")] = "off",
    fabric: Annotated[bool, typer.Option(
        "--fabric", help="Cable the nodes' InfiniBand HCAs to a generated rail-optimised fabric (a leaf per rail per "
                         "4 nodes, 2 spines), simulated by ibsim with opensm as its SM, and write its plan to "
                         "<dir>/fabric-plan.yaml: ibnetdiscover, iblinkinfo, ibqueryerrors (and sminfo on the first "
                         "node, the inventory's fabric vantage) are then the real tools.")] = False,
    fmt: FormatOption = "text",
) -> None:
    """Start a lab (or reuse the running one of the same shape) and print its inventory path.

    Node state (injected faults, upgrades done by playbooks) survives `lab down` and `lab up`
    of the same shape; another shape starts fresh nodes.

    Example: ansible-inventory -i "$(fabricproof lab up --nodes 200 --profile mixed)" --graph
    """
    _check_format(fmt)
    status = manager.up(_lab_dir(directory), nodes, profile, port, node_store=node_store, progress=_progress,
                        latency_profile=latency, fabric=fabric)
    if fmt == "json":
        typer.echo(json.dumps(status.as_dict(), indent=2))
    else:
        typer.echo(str(status.layout.inventory))


@app.command("status")
@lab_errors
def status(directory: DirOption = None, fmt: FormatOption = "text") -> None:
    """Show whether the lab runs, with which nodes, and which sshd died. Exit 0 only when it runs."""
    _check_format(fmt)
    st = manager.status(_lab_dir(directory))
    doc = st.as_dict()
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2))
    else:
        _print_status(doc)
    if not st.running:
        raise typer.Exit(ExitCode.CHECK_FAILED)


def _say(text: str) -> None:
    console.print(text, soft_wrap=True)


def _print_status(doc: dict[str, Any]) -> None:
    if doc["state"] == manager.ABSENT:
        _say(f"no lab in {shown(doc['dir'])}")
        return
    sshd = doc["sshd"]
    profiles = ", ".join(f"{n} {p}" for p, n in doc["profiles"].items())
    _say(f"lab {shown(doc['dir'])}: [bold]{doc['state']}[/]")
    _say(f"  nodes      {doc['nodes']} ({profiles}), {doc['first_host']['name']} "
         f"{doc['first_host']['address']} .. {doc['last_host']['name']} {doc['last_host']['address']}")
    _say(f"  port       {doc['port']}   user {doc['user']}   tool latency {doc['latency']}")
    _say(f"  sshd       {sshd['alive']} of {sshd['total']} alive")
    _say(f"  inventory  {shown(doc['inventory'])}")
    _say(f"  ssh        ssh -F {shown(doc['ssh_config'])} {doc['first_host']['name']} nvidia-smi -L")
    fabric = doc.get("fabric")
    if fabric:
        state = "running" if fabric["ibsim"]["alive"] and fabric["opensm"]["alive"] else "[red]not running[/]"
        _say(f"  fabric     {fabric['leaves']} leaves, {fabric['spines']} spines, {fabric['cas']} HCAs, "
             f"{fabric['cables']} cables at {fabric['speed']} (ibsim runs {fabric['simulated_speed']}): {state} "
             f"(ibsim {fabric['ibsim']['pid']}, opensm {fabric['opensm']['pid']}); vantage {fabric['vantage']}, "
             f"plan {shown(fabric['plan'])}")
    for proc in sshd["processes"]:
        if doc["state"] != manager.STOPPED and (not proc["alive"] or proc["listening"] != proc["addresses"]):
            what = "dead" if not proc["alive"] else f"listening on {proc['listening']} of {proc['addresses']} addresses"
            _say(f"  [red]sshd {proc['group']} (pid {proc['pid']}, {proc['first_address']}.."
                 f"{proc['last_address']}) {what}[/]; log {shown(proc['log'])}")


@app.command("down")
@lab_errors
def down(
    directory: DirOption = None,
    purge: Annotated[bool, typer.Option("--purge", help="Also delete the lab directory (keys, nodes, logs).")] = False,
) -> None:
    """Stop every sshd of the lab and everything running under it; keep the lab's files unless --purge."""
    report = manager.down(_lab_dir(directory), purge=purge)
    if not report.had_lab:
        err_console.print(f"no lab in {shown(str(report.layout.root))}")
        return
    err_console.print(f"lab down: stopped {len(report.stopped_pids)} sshd"
                      + (f"; removed {shown(str(report.layout.root))}" if report.purged else ""))


@fault_app.command("list")
@lab_errors
def fault_list(fmt: FormatOption = "text", directory: DirOption = None) -> None:
    """List the fault catalog: name, what it breaks, and the checks that catch it (the same for every lab: --dir is
    accepted, as by every lab command, so a script can pass it to all of them)."""
    _check_format(fmt)
    faults = manager.faults()
    if fmt == "json":
        typer.echo(json.dumps(faults, indent=2))
        return
    for f in faults:
        caught = ", ".join(f["catches"]) or "-"
        _say(f"[bold]{f['name']}[/]  ({', '.join(f['profiles'])})")
        _say(f"    {shown(f['description'])}")
        _say(f"    caught by: {caught}")
        for label, key in (("over time", "catches_over_time"), ("across the fleet", "catches_fleet"),
                           ("in the fabric's diff (lab up --fabric)", "catches_subnet")):
            if f[key]:
                _say(f"    caught {label}: {', '.join(f[key])}")
    err_console.print(f"{len(faults)} faults")


@fault_app.command("inject")
@lab_errors
def fault_inject(
    host: Annotated[str, typer.Argument(help="Inventory name (h100-0001) or address of a lab node.")],
    fault: Annotated[str, typer.Argument(help="A fault name from `lab fault list`.")],
    directory: DirOption = None,
) -> None:
    """Inject a fault into one node; its emulated tools show it from the next command on."""
    target = manager.fault_inject(_lab_dir(directory), host, fault)
    err_console.print(f"injected {fault} on {target.name} ({target.address})")


@fault_app.command("clear")
@lab_errors
def fault_clear(
    host: Annotated[str, typer.Argument(help="Inventory name or address of a lab node.")],
    fault: Annotated[str | None, typer.Argument(help="The fault to clear (default: every fault on the node).")] = None,
    directory: DirOption = None,
) -> None:
    """Clear one fault, or every fault, from a node."""
    target = manager.fault_clear(_lab_dir(directory), host, fault)
    err_console.print(f"cleared {fault or 'all faults'} on {target.name} ({target.address})")
