"""SSH connection settings without paramiko: the transport's options, and Ansible host vars to address, port, user, key,
known_hosts, ProxyJump, become (pure), so a run whose hosts are collected by worker processes never loads paramiko."""

from __future__ import annotations

import getpass
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import spool
from ..redact import is_secret_var
from .knownhosts import SYSTEM_FILES, USER_FILES

_TRUE = {"yes", "true", "on", "1", "y"}


@dataclass(frozen=True)
class SSHOptions:
    """How the SSH transport connects: host-key policy, timeouts and retries, and an output cap per host."""

    accept_new_host_keys: bool = False  # record unknown host keys (never a changed one) instead of refusing
    connect_timeout_s: float = 10.0  # per attempt, unless the host's ansible_ssh_timeout says otherwise
    connect_attempts: int = 3
    retry_backoff_s: float = 0.5  # doubled after each failed attempt
    max_output_bytes: int = 256 * 1024 * 1024  # per host: a host printing without end must not eat the controller
    memory_bytes: int = spool.MEMORY_BYTES  # per host: output beyond it goes to the run directory as it arrives
    #: OpenSSH's ServerAliveInterval/CountMax: after this long without a byte from a host, ask its sshd for a reply;
    #: this many intervals without any answer and the connection is gone (a frozen host, a dead path), not 300 s on.
    alive_interval_s: float = 15.0
    alive_count_max: int = 3
    #: known_hosts files read when the inventory names none (ansible_ssh_known_hosts_file / UserKnownHostsFile)
    default_known_hosts: tuple[str, ...] = SYSTEM_FILES + USER_FILES


class SettingsError(ValueError):
    """Host vars fabricproof cannot turn into an SSH connection; the message names the var."""


@dataclass(frozen=True)
class Hop:
    """One ProxyJump hop."""

    hostname: str
    port: int = 22
    user: str | None = None

    def __str__(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.hostname}{'' if self.port == 22 else f':{self.port}'}"


@dataclass(frozen=True)
class Target:
    """How to reach one host over SSH. `password` never appears in repr or messages."""

    name: str
    hostname: str
    port: int = 22
    user: str = ""
    key_files: tuple[str, ...] = ()
    password: str | None = field(default=None, repr=False)
    known_hosts_files: tuple[str, ...] = SYSTEM_FILES + USER_FILES
    new_keys_file: str = USER_FILES[0]  # where --accept-new-host-keys records keys
    host_key_alias: str | None = None
    jumps: tuple[Hop, ...] = ()
    become: tuple[str, ...] = ()  # argv prefix, e.g. ("sudo", "-n", "--")
    connect_timeout_s: float | None = None

    @property
    def address(self) -> str:
        return f"{self.hostname}:{self.port}"


def _text(vars: Mapping[str, Any], *names: str) -> tuple[str, str] | None:
    """(var name, value) of the first var set, refusing Jinja templates (ansible-inventory does not render them)."""
    for name in names:
        value = vars.get(name)
        if value is None or value == "":
            continue
        text = str(value)
        if "{{" in text or "{%" in text:
            shown = "its value withheld: it carries a secret" if is_secret_var(name) else repr(text[:60])
            raise SettingsError(f"{name} is a Jinja template ({shown}); --via ssh reads inventory values "
                                f"as written: give a literal value or use --via ansible")
        return name, text
    return None


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, (str, int)) and str(value).strip().lower() in _TRUE)


def _port(name: str, text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise SettingsError(f"{name} must be a port number, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise SettingsError(f"{name} must be 1-65535, got {port}")
    return port


def parse_jumps(spec: str, where: str = "ProxyJump") -> tuple[Hop, ...]:
    """`[user@]host[:port][,...]` (IPv6 as [addr]:port), as ssh -J takes it; 'none' means no jump."""
    if spec.strip().lower() == "none":
        return ()
    hops = []
    for part in spec.split(","):
        part = part.strip()
        part = part.removeprefix("ssh://")
        if not part:
            raise SettingsError(f"{where}: empty hop in {spec!r}")
        user, _, hostport = part.rpartition("@")
        if hostport.startswith("["):
            host, _, rest = hostport[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        elif hostport.count(":") == 1:
            host, _, port_text = hostport.partition(":")
        else:
            host, port_text = hostport, ""
        if not host:
            raise SettingsError(f"{where}: no host in {part!r}")
        hops.append(Hop(host, _port(where, port_text) if port_text else 22, user or None))
    return tuple(hops)


def ssh_options(args: str, var: str) -> tuple[dict[str, str], list[str]]:
    """The -o options (lowercased keys, first value wins as in ssh) and other relevant flags of an ssh arg string."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        # Not echoed: ssh arguments can carry secrets (sshpass -p, a ProxyCommand with a token).
        raise SettingsError(f"{var}: cannot split its {len(args)} characters into arguments: {exc}") from None
    opts: dict[str, str] = {}
    identity: list[str] = []
    flags_with_value = {"-o", "-J", "-i", "-p", "-l", "-F"}
    k = 0
    while k < len(words):
        w = words[k]
        flag, value = w[:2], w[2:]
        if flag in flags_with_value:
            if not value:
                k += 1
                if k >= len(words):
                    raise SettingsError(f"{var}: {flag} needs a value")
                value = words[k]
            if flag == "-o":
                key, sep, val = value.partition("=")
                if not sep:
                    key, _, val = value.partition(" ")
                opts.setdefault(key.strip().lower(), val.strip())
            elif flag == "-J":
                opts.setdefault("proxyjump", value)
            elif flag == "-i":
                identity.append(value)
            elif flag == "-p":
                opts.setdefault("port", value)
            elif flag == "-l":
                opts.setdefault("user", value)
            elif flag == "-F":
                raise SettingsError(f"{var}: -F (an ssh_config file) is not read by --via ssh; "
                                    f"put the settings in the inventory or use --via ansible")
        k += 1
    return opts, identity


def target(name: str, vars: Mapping[str, Any], *, default_known_hosts: Sequence[str] = SYSTEM_FILES + USER_FILES,
           default_user: str | None = None) -> Target:
    """Connection settings of one inventory host, in Ansible's precedence."""
    hostname = (_text(vars, "ansible_host", "ansible_ssh_host") or ("", name))[1]
    args = " ".join(t[1] for t in (_text(vars, "ansible_ssh_common_args"), _text(vars, "ansible_ssh_extra_args")) if t)
    opts, identity = ssh_options(args, "ansible_ssh_common_args/ansible_ssh_extra_args") if args else ({}, [])

    port_var = _text(vars, "ansible_port", "ansible_ssh_port")
    port = _port(*port_var) if port_var else _port("-o Port", opts["port"]) if "port" in opts else 22
    user_var = _text(vars, "ansible_user", "ansible_ssh_user")
    user = user_var[1] if user_var else opts.get("user") or default_user or getpass.getuser()

    keys = []
    key_var = _text(vars, "ansible_ssh_private_key_file", "ansible_private_key_file")
    if key_var:
        keys.append(key_var[1])
    keys += identity
    if "identityfile" in opts:
        keys.append(opts["identityfile"])
    password_var = _text(vars, "ansible_password", "ansible_ssh_pass", "ansible_ssh_password")

    proxy_command = opts.get("proxycommand", "none")
    if proxy_command.lower() != "none":
        raise SettingsError("ProxyCommand in ansible_ssh_common_args is not supported by --via ssh; "
                            "use ProxyJump (-J) or --via ansible")
    jumps = parse_jumps(opts["proxyjump"]) if "proxyjump" in opts else ()

    known = list(default_known_hosts)
    new_keys_file = USER_FILES[0]
    user_files = [f for f in opts.get("userknownhostsfile", "").split() if f.lower() != "none"]
    if user_files:
        known += user_files
        new_keys_file = user_files[0]
    known += [f for f in opts.get("globalknownhostsfile", "").split() if f.lower() != "none"]

    timeout: float | None = None
    timeout_var = _text(vars, "ansible_ssh_timeout", "ansible_timeout")
    timeout_text = timeout_var[1] if timeout_var else opts.get("connecttimeout")
    if timeout_text:
        try:
            timeout = float(timeout_text)
        except ValueError:
            raise SettingsError(f"connect timeout must be a number of seconds, got {timeout_text!r}") from None

    become: tuple[str, ...] = ()
    if _truthy(vars.get("ansible_become")):
        method = (_text(vars, "ansible_become_method") or ("", "sudo"))[1]
        if method != "sudo":
            raise SettingsError(f"ansible_become_method {method!r} is not supported by --via ssh (only sudo); "
                                f"use --via ansible")
        become_user = (_text(vars, "ansible_become_user") or ("", "root"))[1]
        # -n: never prompt. A password prompt would hang the collection; sudo fails fast instead.
        become = ("sudo", "-n", *(("-u", become_user) if become_user != "root" else ()), "--")

    return Target(name=name, hostname=hostname, port=port, user=user, key_files=tuple(dict.fromkeys(keys)),
                  password=password_var[1] if password_var else None,
                  known_hosts_files=tuple(dict.fromkeys(known)), new_keys_file=new_keys_file,
                  host_key_alias=opts.get("hostkeyalias") or None, jumps=jumps, become=become,
                  connect_timeout_s=timeout)
