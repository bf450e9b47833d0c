"""InfiniBand fabric faults (issue 21): cabling against the plan. They change the lab's simulated fabric (the lab runtime
applies them to ibsim: fabricproof_lab.fabric.edits, by the same names); here is what the node itself then shows."""

from __future__ import annotations

from ..model import Node
from .base import GDR, GDR_BUT_GB200, Fault, compute_hcas, compute_port
from .perf import COLLECTIVE

#: The check ids of issue 21's fabric diff (the subnet family); a fault names the ones that fail on its host.
SUBNET_CHECKS = ("subnet.cable_placement", "subnet.cable_present", "subnet.cable_unplanned", "subnet.link_width",
                 "subnet.link_speed", "subnet.rail_aligned", "subnet.names_unique", "subnet.switch_errors",
                 "subnet.sm_master")

#: Which compute HCA (index among the node's compute HCAs, modulo their count) each fault concerns: the fabric
#: edits read these too, so the node's view and the fabric agree on the port.
SWAPPED = (0, 1)
WRONG_PORT = 2
UPLINK_OF = 0  # the first uplink of the leaf this HCA is cabled to
NARROW = 3
SLOW = 1
ERRORS_ON = 0  # the leaf port this HCA is cabled to
EXTRA_FROM = 0  # a spare uplink port of this HCA's leaf, cabled to spine-1's spare port
DUPLICATE = (1, 0)  # HCA 1 answers with HCA 0's node description
UNPLUGGED = 2

#: One speed generation down, and the rate (Gb/s at 4X) of each.
SLOWER = {"NDR": "HDR", "HDR": "EDR", "EDR": "FDR"}
RATE_4X = {"NDR": 400, "HDR": 200, "EDR": 100, "FDR": 56}


def _narrow(view: Node) -> None:
    port = compute_port(view, NARROW)
    speed = port["width"].split()[-1]
    port.update(rate=port["rate"] // 4, width=f"1X {speed}")


def _slow(view: Node) -> None:
    port = compute_port(view, SLOW)
    speed = SLOWER[port["width"].split()[-1]]
    port.update(rate=RATE_4X[speed], width=f"4X {speed}")


def _unplugged(view: Node) -> None:
    compute_port(view, UNPLUGGED).update(state="Down", phys_state="Polling", rate=10, width="4X SDR", base_lid=65535,
                                         sm_lid=0)


def hca_name(node: Node, n: int) -> str:
    """The name of the n-th compute HCA (modulo their count), as the fabric edits need it."""
    hcas = compute_hcas(node)
    return hcas[n % len(hcas)]["name"]


FAULTS: tuple[Fault, ...] = (
    Fault("subnet-rails-swapped", "mlx5_0 and mlx5_1 are cabled to each other's rail leaf (two cables crossed at the "
          "host); both ports stay Active at full rate, so the node's own checks pass. Their rails' traffic crosses "
          "the spines: a collective over the node's leaf is slow and its search names the node.", "fabric",
          catches_subnet=("subnet.cable_placement", "subnet.rail_aligned"), catches_collective=COLLECTIVE),
    Fault("subnet-hca-wrong-port", "mlx5_2 is on the right leaf but its spare host port, not the port the plan gives "
          "it.", "fabric", catches_subnet=("subnet.cable_placement",)),
    Fault("subnet-uplink-missing", "The first spine uplink of mlx5_0's leaf is unplugged (every host on that leaf "
          "loses a path): collectives across leaves through it run at half, and the collective search names the "
          "leaf's path to the spines, no host.", "fabric", catches_subnet=("subnet.cable_present",)),
    Fault("subnet-link-1x", "mlx5_3's cable trained at 1X width: the node's ibstat shows a quarter of its rate.",
          "fabric", catches=("ib.rate",), catches_subnet=("subnet.link_width",), catches_probes=GDR,
          catches_probes_by_profile=GDR_BUT_GB200, apply=_narrow),
    Fault("subnet-link-slow", "mlx5_1's cable trained one speed generation down (HDR in an NDR fabric, EDR in an HDR "
          "one).", "fabric", catches=("ib.rate",), catches_subnet=("subnet.link_speed",), catches_probes=GDR,
          catches_probes_by_profile=GDR_BUT_GB200, apply=_slow),
    Fault("subnet-switch-errors", "The leaf port mlx5_0 is cabled to counts symbol errors, link downs and receive "
          "errors, more on every read of the switch counters.", "fabric",
          catches_subnet=("subnet.switch_errors",)),
    Fault("subnet-extra-link", "An unplanned cable joins mlx5_0's leaf (a spare uplink port) to spine-1 (its spare "
          "port).", "fabric", catches_subnet=("subnet.cable_unplanned",)),
    Fault("subnet-duplicate-desc", "mlx5_1 answers with mlx5_0's node description: two CAs of the subnet share one "
          "name.", "fabric", catches_subnet=("subnet.names_unique",)),
    Fault("subnet-hca-unplugged", "mlx5_2's cable is out: the fabric lost the CA, and the node's ibstat shows the port "
          "Down, Polling.", "fabric", catches=("ib.port_active", "ib.phys_linkup", "ib.rate"),
          catches_subnet=("subnet.cable_present",), catches_probes=GDR, catches_probes_by_profile=GDR_BUT_GB200,
          apply=_unplugged),
)
