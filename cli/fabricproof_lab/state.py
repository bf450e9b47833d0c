"""The lab state file <lab>/lab.json: shape, port, hosts and the PID of every sshd (atomic writes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricproof.fsutil import atomic_write_text
from .errors import LabError
from .topology import LabHost

FORMAT_VERSION = 1


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class SshdGroup:
    """One sshd and the (at most 16) node addresses it listens on. pid is None when stopped."""

    group: int
    config: str
    log: str
    addresses: list[str]
    pid: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "pid": self.pid, "config": self.config, "log": self.log,
                "addresses": self.addresses}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SshdGroup:
        return cls(group=int(data["group"]), pid=data.get("pid"), config=str(data["config"]),
                   log=str(data["log"]), addresses=[str(a) for a in data["addresses"]])


@dataclass
class LabState:
    dir: str
    profile: str
    nodes: int
    port: int
    user: str
    hosts: list[LabHost]
    sshd: list[SshdGroup]
    node_store: str | None = None  # where <lab>/nodes really is (a tmpfs store or the lab dir itself)
    latency: str = "off"  # the tools' latency profile (lab/latency.py)
    fabric: dict[str, Any] | None = None  # the InfiniBand fabric (fabric.sim.FabricState), when the lab has one
    created: str = field(default_factory=now)
    started: str | None = None
    stopped: str | None = None

    @property
    def shape(self) -> tuple[int, str]:
        return self.nodes, self.profile

    def host(self, name_or_address: str) -> LabHost | None:
        for host in self.hosts:
            if name_or_address in (host.name, host.address):
                return host
        return None

    def pids(self) -> list[int]:
        return [g.pid for g in self.sshd if g.pid is not None]

    def as_dict(self) -> dict[str, Any]:
        return {"version": FORMAT_VERSION, "dir": self.dir, "profile": self.profile, "nodes": self.nodes,
                "port": self.port, "user": self.user, "created": self.created, "started": self.started,
                "stopped": self.stopped, "node_store": self.node_store, "latency": self.latency,
                "fabric": self.fabric,
                "sshd": [g.as_dict() for g in self.sshd],
                "hosts": [h.as_dict() for h in self.hosts]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabState:
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported lab state version {data.get('version')!r}")
        return cls(dir=str(data["dir"]), profile=str(data["profile"]), nodes=int(data["nodes"]),
                   port=int(data["port"]), user=str(data["user"]), created=str(data["created"]),
                   started=data.get("started"), stopped=data.get("stopped"), node_store=data.get("node_store"),
                   latency=str(data.get("latency", "off")), fabric=data.get("fabric"),
                   sshd=[SshdGroup.from_dict(g) for g in data["sshd"]],
                   hosts=[LabHost.from_dict(h) for h in data["hosts"]])


def load(path: Path) -> LabState | None:
    """The saved state, or None when there is no lab at this path."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return LabState.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise LabError(f"{path} is not a readable lab state ({exc}); remove the lab with `lab down --purge`") from None


def save(path: Path, state: LabState) -> None:
    atomic_write_text(path, json.dumps(state.as_dict(), indent=1) + "\n", mode=0o644)
