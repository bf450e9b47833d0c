"""The shape of a lab: which emulated host sits on which loopback address, with which profile and rack."""

from __future__ import annotations

from dataclasses import dataclass

from .emu import profiles as emu_profiles

# The emulation's profile table is the one source of profile names, hostname prefixes, rack sizes
# and the mixed-lab proportions; the runtime only lays hosts out on addresses.
PROFILES: tuple[str, ...] = emu_profiles.PROFILE_NAMES
MIXED = "mixed"
PROFILE_CHOICES: tuple[str, ...] = (*PROFILES, MIXED)

# 127.10.X.Y with Y in 1..250 leaves .0 and .251-.255 alone, so X.Y never looks like a broadcast
# address to a human reading logs; 250 addresses per /24.
ADDRESSES_PER_OCTET = 250
# 2,000 nodes = 125 sshd of ~3.3 MB: ample for the 1,000-node target, small enough to stay
# harmless on a shared 2-core machine.
MAX_NODES = 2000


@dataclass(frozen=True)
class LabHost:
    """One emulated node: inventory name, loopback address, profile, index within profile, rack."""

    name: str
    address: str
    profile: str
    index: int
    rack: int | None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "address": self.address, "profile": self.profile,
                "index": self.index, "rack": self.rack}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> LabHost:
        rack = data.get("rack")
        return cls(name=str(data["name"]), address=str(data["address"]), profile=str(data["profile"]),
                   index=int(data["index"]), rack=None if rack is None else int(rack))  # type: ignore[arg-type]


def node_address(i: int) -> str:
    """Address of the i-th node (0-based): 127.10.(i // 250).(i % 250 + 1)."""
    if not 0 <= i < ADDRESSES_PER_OCTET * 256:
        raise ValueError(f"node index {i} out of range")
    return f"127.10.{i // ADDRESSES_PER_OCTET}.{i % ADDRESSES_PER_OCTET + 1}"


def validate_shape(nodes: int, profile: str) -> None:
    if profile not in PROFILE_CHOICES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILE_CHOICES)}")
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"--nodes must be between 1 and {MAX_NODES}, got {nodes}")


def short_name(profile: str) -> str:
    return str(emu_profiles.PROFILES[profile]["short"])


def rack_size(profile: str) -> int | None:
    """Trays per rack for profiles whose NVLink domain spans a rack (GB200 NVL72: 18), else None."""
    size = emu_profiles.PROFILES[profile].get("rack_size")
    return None if size is None else int(size)


def plan_hosts(nodes: int, profile: str) -> list[LabHost]:
    """All hosts of a lab in address order, each profile one contiguous block, named
    `<short>-<n>` with n counted per profile from 1 (h100-0001); racks counted from 1."""
    validate_shape(nodes, profile)
    width = max(4, len(str(nodes)))
    hosts: list[LabHost] = []
    seen: dict[str, int] = {}
    for prof in emu_profiles.profile_sequence(profile, nodes):
        k = seen[prof] = seen.get(prof, -1) + 1
        size = rack_size(prof)
        hosts.append(LabHost(name=f"{short_name(prof)}-{k + 1:0{width}d}", address=node_address(len(hosts)),
                             profile=prof, index=k, rack=None if size is None else k // size + 1))
    return hosts


def profile_group(profile: str) -> str:
    """Ansible group name of a profile (Ansible group names cannot contain '-')."""
    return profile.replace("-", "_")


def rack_group(rack: int) -> str:
    return f"rack_{rack:02d}"


def chunk(items: list[str], size: int) -> list[list[str]]:
    return [items[k:k + size] for k in range(0, len(items), size)]
