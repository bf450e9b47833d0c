"""`fabricproof demo`: the guided tour on the built-in lab — prove a fleet, break it, see the proof fail, mend it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.rule import Rule

from ..judging import baseline as baseline_mod
from ..judging import catalog
from ..collect import collect
from ..judging.evaluate import evaluate, exit_code
from ..inventory import load as load_inventory
from fabricproof_lab import manager
from ..model import Outcome, Report
from ..paths import inventories_dir
from ..reporters import table
from ..rollout import decisions, runs
from ..words import counted
from ._common import console, input_errors, shown
from ._runlog import stamp

#: (host, fault) pairs the tour injects: one NVLink, one Fabric Manager, one GPUDirect RDMA failure. Two H100s, so
#: fleet checks still have a majority to judge the outlier against.
TOUR_FAULTS = (("h100-0001", "nvlink-inactive"), ("h100-0002", "fm-driver-mismatch"), ("h200-0001", "peermem-missing"))


@dataclass(frozen=True)
class Step:
    title: str
    ok: bool
    detail: str = ""


def _say(text: str) -> None:
    console.print(text, highlight=False, soft_wrap=True)


def _prove(inv_path: Path, base: baseline_mod.Baseline, run_dir: Path) -> Report:
    inv = load_inventory(str(inv_path))
    hosts = [inv.hosts[h] for h in sorted(inv.hosts)]
    result = collect(hosts, run_dir, via="ssh", inventory=str(inv_path))
    return evaluate(result.facts_by_host, base, catalog.load(), groups={h.name: h.groups for h in hosts},
                    collection_errors=result.collection_errors, run_id=result.run_id)


def _failed(report: Report) -> set[tuple[str, str]]:
    return {(r.check_id, r.host) for r in report.results if r.outcome is Outcome.FAIL}


def tour(lab_dir: Path, nodes: int, work: Path, step: Callable[[Step], None]) -> bool:
    """Run the tour; return whether every step behaved as it should."""
    base = baseline_mod.load(inventories_dir() / "lab" / "baseline.yaml")
    status = manager.up(lab_dir, nodes, "mixed")
    lab = status.lab
    assert lab is not None
    inv_path = status.layout.inventory
    by_profile: dict[str, str] = {}
    for h in lab.hosts:
        by_profile.setdefault(h.profile, h.name)
    step(Step(f"lab up: {lab.nodes} emulated nodes behind real sshd on loopback", True,
              ", ".join(f"{p}: {sum(1 for h in lab.hosts if h.profile == p)}" for p in sorted(by_profile))
              + f"\ninventory: {inv_path}"))

    healthy = _prove(inv_path, base, work / "1-healthy")
    ok = exit_code(healthy) == 0
    s = healthy.summary
    step(Step("validate the healthy fleet over SSH against inventories/lab/baseline.yaml", ok,
              f"{s.passed} passed, {s.failed} failed, {s.skipped} not applicable on {counted(s.hosts, 'host')} -> exit "
              f"{exit_code(healthy)}"))

    names = {h.name for h in lab.hosts}
    injected = [(h, f) for h, f in TOUR_FAULTS if h in names]
    expected: set[tuple[str, str]] = set()
    faults = {f["name"]: f for f in manager.faults()}
    for host, fault in injected:
        manager.fault_inject(lab_dir, host, fault)
        profile = next(h.profile for h in lab.hosts if h.name == host)
        catches = faults[fault].get("catches_by_profile", {}).get(profile, faults[fault]["catches"])
        expected |= {(c, host) for c in catches}
    step(Step("inject faults", True, "\n".join(f"{h}: {f} — {faults[f]['description']}" for h, f in injected)))

    broken = _prove(inv_path, base, work / "2-broken")
    caught = _failed(broken)
    ok_broken = exit_code(broken) == 1 and expected <= caught and {h for _, h in caught} <= {h for h, _ in injected}
    step(Step("validate again: the proof fails, on exactly the faulty hosts, with the remediation", ok_broken,
              f"{len(caught)} failures on {len({h for _, h in caught})} hosts -> exit {exit_code(broken)}"))
    table.print_to(console, broken)

    for host, _ in injected:
        manager.fault_clear(lab_dir, host)
    mended = _prove(inv_path, base, work / "3-mended")
    ok_mended = exit_code(mended) == 0
    step(Step("clear the faults and prove the fleet again", ok_mended, f"exit {exit_code(mended)}"))

    ok_rollout = _rollout_rolls_back(lab_dir, inv_path, work, step)
    return ok and ok_broken and ok_mended and ok_rollout


def _rollout_rolls_back(lab_dir: Path, inv_path: Path, work: Path, step: Callable[[Step], None]) -> bool:
    """A driver + Fabric Manager rollout whose pilot breaks: the post-gate fails and the pilot rolls itself back."""
    plan = inventories_dir() / "lab" / "plans" / "driver-fm-upgrade.yml"
    pilot = "h100-0001"
    manager.fault_inject(lab_dir, pilot, "upgrade-breaks-fm")
    step(Step(f"rollout {plan.name}: the pilot {pilot} will leave Fabric Manager behind the new driver", True,
              "waves pilot -> 25% -> rest; gates: driver, FM, fabric, NVLink; on failure: roll the wave back"))
    code, run_id = runs.start(plan, runs_dir=work / "rollouts", inventory_override=str(inv_path),
                              progress=lambda m: _say(shown(f"{stamp()}  {m}")))
    run_dir = work / "rollouts" / run_id
    log = [decisions.format_line(d) for d in decisions.read(run_dir)]
    step(Step("the post-gate failed on the pilot, which rolled itself back; no other host was touched", code == 4,
              f"exit {code}; decision log {decisions.path_of(run_dir)}:\n" + "\n".join(log)))
    manager.fault_clear(lab_dir, pilot)
    return code == 4


@input_errors
def demo(
    nodes: Annotated[int, typer.Option("--nodes", help="Lab size (mixed: A100, H100, H200 and GB200 nodes).")] = 16,
    directory: Annotated[Path | None, typer.Option("--dir", help="Lab directory (default: a fresh one under /tmp).")] = None,
    keep: Annotated[bool, typer.Option("--keep", help="Leave the lab running afterwards (stop it with `fabricproof lab down --dir DIR`).")] = False,
) -> None:
    """Tour fabricproof on the built-in lab: prove an emulated fleet, break it, watch the proof fail, mend it.

    Needs root and Debian's openssh-server (the lab runs a real sshd on loopback addresses only).
    Exit 0 when every step behaved as it should.
    """
    root = Path(tempfile.mkdtemp(prefix="fabricproof-demo-", dir="/tmp"))
    root.chmod(0o711)  # the unprivileged lab user must traverse to its node files
    lab_dir = directory or root / "lab"
    steps: list[Step] = []

    def step(s: Step) -> None:
        steps.append(s)
        console.print(Rule(f"[bold]{shown(s.title)}[/]", style="green" if s.ok else "red"))
        if s.detail:
            _say(shown(s.detail))
        if not s.ok:
            _say("[red]this step did not behave as expected[/]")

    try:
        ok = tour(lab_dir, nodes, root / "runs", step)
    finally:
        if not keep:
            manager.down(lab_dir, purge=True)
            _say(f"lab down: every sshd stopped; evidence kept in {shown(str(root / 'runs'))}")
        else:
            _say(f"lab kept running: fabricproof lab status --dir {shown(str(lab_dir))}")
    raise typer.Exit(0 if ok else 1)
