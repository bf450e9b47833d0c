"""`lspci -n -d 10de:`: NVSwitch PCI functions (class 0680 NVIDIA bridges) and their device ids."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import array, integer, obj, string
from ..pcie import is_gpu, is_nvidia, parse_lspci_header
from ..textutil import strip_ansi

# The NVSwitch enumerates as PCI class 0680 ("Bridge", other bridge); Grace root ports and PCIe
# switch ports are class 0604 ("PCI bridge") and must not be counted.
_NVSWITCH_CLASS_CODE = "0680"
_NVSWITCH_CLASS_NAME = "Bridge"
_PLAIN_DEVICE_ID = re.compile(r"\bDevice ([0-9a-fA-F]{4})\b")


def parse_nvswitch_pci(text: str) -> dict[str, Any]:
    """Count NVSwitch functions in `lspci -n -d 10de:`, `lspci -nn` or plain `lspci` output.

    Empty output is a valid answer (a filtered listing on a host without NVIDIA devices);
    non-empty output without a single lspci header line is not lspci output.
    """
    lines = strip_ansi(text).replace("\r", "").split("\n")
    headers = [h for line in lines if line[:1] not in (" ", "\t") and (h := parse_lspci_header(line))]
    if not headers and text.strip():
        raise ParseError("no lspci device lines found")
    devices: list[dict[str, Any]] = []
    gpus = 0
    for h in headers:
        if is_gpu(h):
            gpus += 1
        if not is_nvidia(h):
            continue
        if h["class_code"] == _NVSWITCH_CLASS_CODE or (h["class_code"] is None and h["class_name"] == _NVSWITCH_CLASS_NAME):
            device_id = h["device_id"]
            if device_id is None and (m := _PLAIN_DEVICE_ID.search(h["description"])):
                device_id = m.group(1).lower()
            devices.append({"bdf": h["bdf"], "device_id": device_id})
    return {
        "count": len(devices),
        "devices": devices,
        "device_ids": sorted({d["device_id"] for d in devices if d["device_id"]}),
        "gpu_count": gpus,
    }


NVSWITCH_PCI_SCHEMA: dict[str, Any] = obj(
    "NVSwitch PCI functions visible to the host.",
    {
        "count": integer("Number of NVIDIA class-0680 bridges (NVSwitches); 0 on GB200 compute trays."),
        "devices": array(
            "One record per NVSwitch function.",
            obj(
                "An NVSwitch PCI function.",
                {
                    "bdf": string("PCI address as printed."),
                    "device_id": string(
                        "PCI device id, e.g. '1af1' (A100) or '22a3' (H100); null when lspci printed a name only.", True
                    ),
                },
            ),
        ),
        "device_ids": array("Distinct NVSwitch device ids.", string("PCI device id.")),
        "gpu_count": integer("NVIDIA 3D/VGA controllers in the same listing."),
    },
)

NVSWITCH_PCI = Collector(
    id="nvswitch_pci",
    argv=tools.argv("nvswitch_pci"),
    parse=parse_nvswitch_pci,
    provides="/nvswitch/pci",
    schema=NVSWITCH_PCI_SCHEMA,
    family="nvswitch",
    description="NVSwitch count and device ids from the NVIDIA PCI functions.",
    corpus=("nvswitch", "lspci"),
)

COLLECTORS = (NVSWITCH_PCI,)
