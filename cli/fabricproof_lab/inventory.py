"""What `lab up` hands to clients: the Ansible YAML inventory, known_hosts and an ssh_config (pure renderers)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from .topology import PROFILES, LabHost, profile_group, rack_group

LAB_GROUP = "lab"
REMOTE_PYTHON = "/usr/bin/python3"  # the lab user cannot reach root's pyenv Python; Debian's python3 it can


def ssh_common_args(known_hosts: Path) -> str:
    """OpenSSH options every client of the lab uses: the lab's known_hosts, checked strictly."""
    return f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"


#: The host var that names the host fabric-scope collectors run on (issue 21): the lab's first node, when it has a fabric.
VANTAGE_VAR = "fabricproof_fabric_vantage"


def render_inventory(hosts: Sequence[LabHost], *, port: int, user: str, client_key: Path,
                     known_hosts: Path, vantage: str | None = None) -> dict[str, Any]:
    """The inventory as data: group `lab` (all hosts, connection vars), one group per profile and,
    for racked profiles (GB200), one group per rack. Host vars: address, profile, data address, rack.

    Every profile's group is declared, empty when no node has that profile: the lab baseline (one group per
    profile) names only groups its inventory has, whichever profiles a lab runs."""
    by_profile: dict[str, dict[str, Any]] = {profile_group(p): {} for p in PROFILES}
    by_rack: dict[int, dict[str, Any]] = {}
    for host in hosts:
        # fabricproof_data_address: where a pairwise probe's client dials this host's server (its own 127.x address:
        # the emulated perftest server listens there).
        hostvars: dict[str, Any] = {"ansible_host": host.address, "fabricproof_lab_profile": host.profile,
                                    "fabricproof_data_address": host.address}
        if host.name == vantage:
            hostvars[VANTAGE_VAR] = True
        if host.rack is not None:
            hostvars["rack"] = host.rack
            by_rack.setdefault(host.rack, {})[host.name] = None
        by_profile.setdefault(profile_group(host.profile), {})[host.name] = hostvars
    children: dict[str, Any] = {group: {"hosts": members} if members else {} for group, members in by_profile.items()}
    children.update({rack_group(rack): {"hosts": members} for rack, members in sorted(by_rack.items())})
    lab_vars = {
        "ansible_port": port,
        "ansible_user": user,
        "ansible_ssh_private_key_file": str(client_key),
        "ansible_ssh_common_args": ssh_common_args(known_hosts),
        "ansible_python_interpreter": REMOTE_PYTHON,
    }
    return {"all": {"children": {LAB_GROUP: {"vars": lab_vars, "children": children}}}}


def dump_inventory(inventory: dict[str, Any], lab_dir: Path) -> str:
    header = (f"# Ansible inventory of the fabricproof lab in {lab_dir}.\n"
              "# Written by `fabricproof lab up`; rewritten on every start.\n")
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the C dumper: 1,000 hosts in ~0.1 s
    return header + yaml.dump(inventory, Dumper=dumper, sort_keys=False, default_flow_style=False)


def known_hosts_entry(address: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts: bare on port 22, `[addr]:port` otherwise."""
    return address if port == 22 else f"[{address}]:{port}"


def render_known_hosts(hosts: Sequence[LabHost], port: int, host_public_key: str) -> str:
    return "".join(f"{known_hosts_entry(h.address, port)} {host_public_key}\n" for h in hosts)


def render_ssh_config(hosts: Sequence[LabHost], *, port: int, user: str, client_key: Path,
                      known_hosts: Path) -> str:
    """An ssh_config so `ssh -F <lab>/ssh_config <host> nvidia-smi -L` works by inventory name."""
    lines = ["# ssh -F <this file> <inventory host name> <command>. Written by `fabricproof lab up`."]
    for host in hosts:
        lines += [f"Host {host.name}", f"    HostName {host.address}"]
    lines += [
        "Host *",
        f"    Port {port}",
        f"    User {user}",
        f"    IdentityFile {client_key}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {known_hosts}",
        "    StrictHostKeyChecking yes",
        "    BatchMode yes",
    ]
    return "\n".join(lines) + "\n"
