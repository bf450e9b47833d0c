"""Transports: how fixed collector argv reach a host. An explicit registry, name -> class taking TransportOptions."""

from __future__ import annotations

from .ansible import AnsibleTransport
from .base import ErrorKind, FleetTransport, HostError, Transport, TransportOptions
from .local import LocalTransport
from .replay import ReplayTransport
from .ssh import SSHTransport

TRANSPORTS: dict[str, type] = {
    "ssh": SSHTransport,
    "ansible": AnsibleTransport,
    "local": LocalTransport,
    "replay": ReplayTransport,
}


def create(name: str, options: TransportOptions | None = None) -> Transport:
    """A transport by registry name."""
    try:
        cls = TRANSPORTS[name]
    except KeyError:
        raise ValueError(f"unknown transport {name!r}; choose one of {', '.join(TRANSPORTS)}") from None
    return cls(options or TransportOptions())


__all__ = ["TRANSPORTS", "ErrorKind", "FleetTransport", "HostError", "Transport", "TransportOptions", "create"]
