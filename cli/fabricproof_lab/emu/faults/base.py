"""What the fault families share: the Fault record, the profiles faults apply to, node edits and probe checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import model
from ..model import Node, compute_hcas
from ..profiles import DRIVER_RELEASES, deb_version

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

ALL = ("dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72")
FM_PROFILES = ("dgx-a100", "dgx-h100", "hgx-h200")
FABRIC_PROFILES = ("dgx-h100", "hgx-h200", "gb200-nvl72")
X86 = FM_PROFILES
HGX_H = ("dgx-h100", "hgx-h200")


@dataclass(frozen=True)
class Fault:
    """One catalog entry (the faults package's docstring says what each list means)."""

    name: str
    description: str
    kind: str  # overlay | state | trigger | fabric (the lab's InfiniBand fabric changes; `apply` is the node's view)
    profiles: tuple[str, ...] = ALL
    catches: tuple[str, ...] = ()
    catches_by_profile: dict[str, tuple[str, ...]] = field(default_factory=dict)
    catches_over_time: tuple[str, ...] = ()
    catches_fleet: tuple[str, ...] = ()
    catches_fleet_by_profile: dict[str, tuple[str, ...]] = field(default_factory=dict)
    breaks: tuple[str, ...] = ()
    catches_probes: tuple[str, ...] = ()
    catches_probes_by_profile: dict[str, tuple[str, ...]] = field(default_factory=dict)
    blocks_probes: bool = False
    #: perf.* checks that fail on the node only once a multi-node collective over it runs and its search names the
    #: node (fabricproof collective run --search); its own single-node and pair probes pass.
    catches_collective: tuple[str, ...] = ()
    #: kind "fabric": the subnet.* checks (issue 21) that fail on the host once the fabric is diffed against the
    #: lab's fabric-plan.yaml; `catches` stays what the node's own view fails (a 1x link lowers its ibstat rate).
    catches_subnet: tuple[str, ...] = ()
    apply: Callable[[Node], None] | None = None  # overlay: change the render view
    inject: Callable[[Node], None] | None = None  # state: change the stored node
    clear: Callable[[Node], None] | None = None  # state: put the healthy value back

    def catches_for(self, profile: str) -> tuple[str, ...]:
        """Exact single-snapshot checks that fail on a node of `profile` with this fault."""
        return self.catches_by_profile.get(profile, self.catches)

    def catches_fleet_for(self, profile: str) -> tuple[str, ...]:
        """Fleet checks that fail when a node of `profile` with this fault is compared with healthy peers."""
        return self.catches_fleet_by_profile.get(profile, self.catches_fleet)

    def catches_probes_for(self, profile: str) -> tuple[str, ...]:
        """perf.* checks that fail on a node of `profile` with this fault once the probes run on it."""
        return self.catches_probes_by_profile.get(profile, self.catches_probes)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for `lab fault list --format json`."""
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "profiles": list(self.profiles),
            "catches": list(self.catches),
            "catches_by_profile": {p: list(self.catches_for(p)) for p in self.profiles},
            "catches_over_time": list(self.catches_over_time),
            "catches_fleet": list(self.catches_fleet),
            "catches_fleet_by_profile": {p: list(self.catches_fleet_for(p)) for p in self.profiles},
            "breaks": list(self.breaks),
            "catches_probes": list(self.catches_probes),
            "catches_probes_by_profile": {p: list(self.catches_probes_for(p)) for p in self.profiles},
            "blocks_probes": self.blocks_probes,
            "catches_collective": list(self.catches_collective),
            "catches_subnet": list(self.catches_subnet),
        }


def compute_port(node: Node, n: int) -> dict[str, Any]:
    """Port 1 of the n-th compute HCA (counting round when the node has fewer)."""
    hcas = compute_hcas(node)
    return hcas[n % len(hcas)]["ports"][0]


def other_release(version: str, step: int) -> str:
    """Another release of the same branch: step -1 = the one before (or after, at the oldest)."""
    rel = DRIVER_RELEASES[model.branch_of(version)]
    i = rel.index(version) if version in rel else 0
    j = i + step
    if not 0 <= j < len(rel):
        j = i - step
    return rel[j]


def set_branch_pkg(node: Node, stem: str, version: str) -> None:
    """Install `version` as the package of its driver branch named `stem`<branch>, removing the other branches'."""
    br = model.branch_of(version)
    for name in [n for n in node["packages"] if n.startswith(stem)]:
        del node["packages"][name]
    name = f"{stem}{br}"
    node["packages"][name] = deb_version(name, version)


def healthy_node(node: Node) -> Node:
    """A fresh healthy node of the same identity (cabled to the lab's fabric as it is): what clearing a fault puts
    back."""
    healthy = model.new_node(node["profile"], node["index"], node["rack"], node["hostname"], node["address"])
    if node.get("fabric"):
        model.attach_fabric(healthy, node["fabric"])
    return healthy


def restart_fm(node: Node) -> None:
    """Stop and start Fabric Manager, as systemd would after a change that concerns it."""
    model.advance(node, 5)
    model.fm_stop(node)
    model.fm_start(node)


def drop_log(node: Node, unit: str, needle: str) -> None:
    """Remove the journal lines of `unit` that contain `needle` (what a fault wrote there)."""
    node["journal"][unit] = [r for r in node["journal"][unit] if needle not in r[2]]


def noop(_: Node) -> None:
    """Tool faults change how a tool answers, not the node: outputs.render_key and cli.py act on their names."""
    return None


#: What a GPU with less NVLink bandwidth costs the probes: the all-reduce busbw and the nvbandwidth pairs it is in
#: (its pairs fall below the weakest-pair gate and the median). A100 baselines set no pair minimum (no published figure).
NVLINK_PROBES = ("perf.nccl_allreduce_busbw", "perf.nvbandwidth_pair_min", "perf.nvbandwidth_spread")
NVLINK_PROBES_BY = {"dgx-a100": ("perf.nccl_allreduce_busbw", "perf.nvbandwidth_spread")}


#: A fabric that is not ready (GPUs In Progress, or FM never up on A100): CUDA does not start, so NCCL and
#: nvbandwidth fail (their checks error) while host-memory perftest runs on.
NOT_READY = ("perf.nccl_allreduce_busbw", "perf.nccl_wrong", "perf.nvbandwidth_pair_min", "perf.nvbandwidth_spread")
NOT_READY_A100 = ("perf.nccl_allreduce_busbw", "perf.nccl_wrong", "perf.nvbandwidth_spread")


#: GB200 trays see every NIC as SYS from every GPU, so ib_gdr_bw (HCAs from `topo -m`'s nearest NIC) covers mlx5_0 only.
GDR = ("perf.ib_gdr_bw",)
GDR_BUT_GB200 = {"gb200-nvl72": ()}
PCIE_PROBES = ("perf.dcgm_diag", "perf.ib_gdr_bw")
