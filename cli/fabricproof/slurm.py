"""Slurm node state for node-local health checks: drain on failure, resume only what fabricproof drained."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

#: Every drain reason the node-local check sets starts with this, and it resumes only nodes whose reason does. It is
#: not the "fabricproof: <plan> run <id>" of a rollout's or runbook's drain (playbooks/drain.yml): a health check
#: that passes mid-change must not put a node back in service under the rollout that drained it.
REASON_PREFIX = "fabricproof check:"
MAX_REASON = 200  # keep `sinfo -R` readable; the failed ids are listed in full in the check output


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # as scontrol prints it, e.g. IDLE+DRAIN, DRAINED, MIXED
    reason: str | None  # without the "[user@time]" suffix scontrol appends

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.upper()

    @property
    def ours(self) -> bool:
        return self.reason is not None and self.reason.startswith(REASON_PREFIX)


def parse_show_node(text: str, name: str) -> NodeState:
    """`scontrol show node NAME` output -> state and reason."""
    state = re.search(r"\bState=(\S+)", text)
    reason = re.search(r"^\s*Reason=(.*?)(?:\s+\[[^\]\s]*@[^\]]*\])?\s*$", text, re.MULTILINE)
    value = reason[1].strip() if reason else None
    return NodeState(name=name, state=state[1] if state else "UNKNOWN",
                     reason=value if value and value != "(null)" else None)


def drain_reason(check_ids: Sequence[str], action: str = "") -> str:
    """"fabricproof check: reboot: gpu.fallen_off_bus,gpu.xid": the node's action (actions.ACTIONS) before the ids,
    so that shortening a long list never cuts what the operator is to do."""
    ids = sorted(dict.fromkeys(check_ids))
    head = f"{REASON_PREFIX} {action}: " if action else f"{REASON_PREFIX} "
    text = head + ",".join(ids)
    k = len(ids)
    while len(text) > MAX_REASON and k > 1:
        k -= 1
        text = f"{head}{','.join(ids[:k])} +{len(ids) - k} more"
    return text


def show_argv(node: str) -> list[str]:
    return ["scontrol", "show", "node", node]


def drain_argv(node: str, check_ids: Sequence[str], action: str = "") -> list[str]:
    # One argv element per key=value: no shell ever sees the reason, so nothing in it needs quoting.
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={drain_reason(check_ids, action)}"]


def resume_argv(node: str) -> list[str]:
    return ["scontrol", "update", f"nodename={node}", "state=resume"]


def node_states_argv(nodes: Sequence[str]) -> list[str]:
    """sinfo's state of each node, one `<node> <state>` line each (the long state names: idle, allocated, ...)."""
    return ["sinfo", "-h", "-N", f"--nodes={','.join(nodes)}", "-o", "%N %T"]


def parse_node_states(text: str) -> dict[str, str]:
    """Node -> sinfo's long state name; a node sinfo lists twice (two partitions) keeps its first."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.setdefault(parts[0], parts[1].rstrip("*~#$@^-+").lower())
    return out


def cancel_name_argv(job_name: str) -> list[str]:
    return ["scancel", "--quiet", f"--name={job_name}"]


def job_names_argv() -> list[str]:
    """The name of every job in the queue, one a line."""
    return ["squeue", "-h", "-o", "%j"]


@dataclass(frozen=True)
class Action:
    """What to do to the node, and why (printed either way)."""

    argv: list[str] | None
    message: str
    reason: str | None = None  # the drain reason argv sets, if it drains
    new_drain: bool = False  # takes a node in service out of it: the drain breaker decides (breaker.py)


def decide(node: NodeState, failed_ids: Sequence[str], passed: bool, action: str = "") -> Action:
    """Drain a failing node unless someone else drained it; resume a passing node only if this check drained it.
    `action` is the failures' most disruptive action, named in the drain reason."""
    if failed_ids:
        if node.drained and not node.ours:
            return Action(None, f"{node.name} is already drained by someone else ({node.reason}); leaving it")
        reason = drain_reason(failed_ids, action)
        if node.drained and node.reason == reason:
            # Draining again would restamp the reason's time, and the breaker counts drains by that time.
            return Action(None, f"{node.name} stays drained: {reason}")
        return Action(drain_argv(node.name, failed_ids, action), f"draining {node.name}: {reason}", reason,
                      new_drain=not node.drained)
    if passed and node.drained and node.ours:
        return Action(resume_argv(node.name), f"resuming {node.name}: checks pass again (was {node.reason})")
    if passed and node.drained:
        return Action(None, f"{node.name} stays drained: the reason is not this check's ({node.reason})")
    return Action(None, "")


class SlurmError(RuntimeError):
    pass


def run(argv: list[str], timeout_s: float = 30.0) -> str:
    """Run scontrol (no shell); stdout, or SlurmError with its first stderr line."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                              check=False)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found on PATH: --drain needs Slurm's scontrol") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(argv[:3])} timed out after {timeout_s:g} s") from None
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[0]
        raise SlurmError(f"{' '.join(argv[:3])} failed: {first}")
    return proc.stdout
