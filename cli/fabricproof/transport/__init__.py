"""Transports: how fixed collector argv reach a host. An explicit registry of kinds, each with its own options type
and the adapter that drives it across a fleet (a thread pool, or Ansible's own fan-out)."""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .base import ErrorKind, FleetRunner, HostError, OnHost, Outcome, RunContext, Transport


class Reach(str, enum.Enum):
    """Where a transport's commands run."""

    REMOTE = "remote"  # on inventory hosts, from this control machine
    SELF = "self"  # on this very node (Slurm health check, cron, DaemonSet)
    RECORDED = "recorded"  # nowhere: a past run's evidence is served back


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


@dataclass(frozen=True)
class TransportKind:
    """One registry entry: where the transport reaches, its class and options type, and the adapter that drives
    it across a fleet. Classes are named, not imported, so paramiko and ansible-runner load only when used."""

    name: str
    help: str
    reach: Reach
    transport: str  # "module:Class" inside this package
    options_type: str  # "module:Class", a frozen dataclass of the transport's own settings
    fleet_runner: str = "fanout:PerHostFleet"  # per-host transports share the thread pool; Ansible fans out itself
    #: "module:function" (name, host vars) that reads one host's connection settings as the transport will,
    #: raising ValueError for one it cannot use; empty when the transport reads none of its own (Ansible does).
    host_settings: str = ""

    @property
    def cls(self) -> type[Transport]:
        return _load(self.transport)

    @property
    def options(self) -> type:
        return _load(self.options_type)

    @property
    def fleet(self) -> Any:
        return _load(self.fleet_runner)

    def check_host(self, name: str, vars: Any) -> None:
        """ValueError when this transport cannot use the host's connection settings."""
        if self.host_settings:
            _load(self.host_settings)(name, vars)


TRANSPORTS: dict[str, TransportKind] = {k.name: k for k in (
    TransportKind("ssh", "paramiko, one connection and one exec per host", Reach.REMOTE,
                  "ssh:SSHTransport", "sshopts:SSHOptions", host_settings="sshopts:target"),
    TransportKind("ansible", "ansible-playbook through ansible-runner (Ansible does the fan-out)", Reach.REMOTE,
                  "ansible:AnsibleTransport", "ansible:AnsibleOptions", fleet_runner="ansible:AnsibleFleet"),
    TransportKind("local", "this node itself, no shell", Reach.SELF, "local:LocalTransport", "local:LocalOptions"),
    TransportKind("replay", "a past run's raw evidence", Reach.RECORDED, "replay:ReplayTransport",
                  "replay:ReplayOptions"),
)}


def names(*reach: Reach) -> tuple[str, ...]:
    """Registry names, in registry order, of the transports that reach where asked (all when none is given)."""
    return tuple(k.name for k in TRANSPORTS.values() if not reach or k.reach in reach)


#: What `--via` takes on collect and validate: every transport that reaches live hosts.
LIVE = (Reach.REMOTE, Reach.SELF)


def choices(reach: Iterable[Reach] = tuple(Reach)) -> str:
    """'ssh (what it is), ansible (...) or local (...)', for --help texts."""
    items = [f"{k.name} ({k.help})" for k in TRANSPORTS.values() if k.reach in tuple(reach)]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def kind(name: str, allowed: Iterable[Reach] = tuple(Reach), option: str = "--via") -> TransportKind:
    """The registry entry for a name the user gave; exit 2 naming the choices otherwise."""
    allowed = tuple(allowed)
    k = TRANSPORTS.get(name)
    if k is None or k.reach not in allowed:
        raise InputError(f"{option} {name!r}: choose one of {', '.join(names(*allowed))}")
    return k


def configure(name: str, **settings: Any) -> Any:
    """The options of transport `name` from the settings a command gathered (inventory_path, accept_new_host_keys,
    ...): each transport takes the ones its options type declares and ignores the rest. A setting it cannot do
    without is an input error naming the transport."""
    k = kind(name)
    fields = {f.name: f for f in dataclasses.fields(k.options)}
    given = {key: value for key, value in settings.items() if key in fields and value is not None}
    missing = [f.name for f in fields.values() if f.name not in given
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        flag = {"inventory_path": "--inventory (-i)"}.get(missing[0], missing[0])
        raise InputError(f"--via {name} needs {flag}")
    return k.options(**given)


def open_fleet(name: str, options: Any, ctx: RunContext) -> tuple[Transport, FleetRunner]:
    """Make transport `name` for one run and the fleet runner that drives it; close the transport afterwards."""
    k = kind(name)
    if options is None:
        options = configure(name)
    if not isinstance(options, k.options):
        raise TypeError(f"the {name} transport takes {k.options.__name__}, not {type(options).__name__}")
    transport = k.cls(options, ctx)
    return transport, k.fleet(transport, ctx)


__all__ = ["LIVE", "TRANSPORTS", "ErrorKind", "FleetRunner", "HostError", "OnHost", "Outcome", "Reach", "RunContext",
           "Transport", "TransportKind", "choices", "configure", "kind", "names", "open_fleet"]
