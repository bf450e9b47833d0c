"""`nvidia-smi -q -x` (XML, DTD v12/v13) -> the /gpu fragment."""

from __future__ import annotations

from typing import Any
from xml.etree.ElementTree import Element
from xml.etree.ElementTree import ParseError as XMLSyntaxError

import defusedxml.ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from ... import tools
from ..base import Collector, ParseError
from ..textutil import to_float, to_int
from .fragment import (
    GPU_SCHEMA,
    HEALTH_KEYS,
    fabric_record,
    gpu_fragment,
    gpu_record,
    mode,
    na,
    ordered_reasons,
    ecc_errors,
    pci_device_id,
    remapped,
    retired,
    yes_no,
)

def _xt(element: Element | None, path: str) -> str | None:
    if element is None:
        return None
    return na(element.findtext(path))


def _x_reasons(gpu: Element) -> list[str]:
    active: list[str] = []
    for block, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),  # before driver 535
    ):
        element = gpu.find(block)
        for child in element if element is not None else ():
            if child.tag.startswith(prefix) and (child.text or "").strip() == "Active":
                active.append(child.tag[len(prefix) :])
    return ordered_reasons(active)


def _x_power_limit(gpu: Element) -> float | None:
    for path in (
        "gpu_power_readings/current_power_limit",
        "power_readings/current_power_limit",
        "power_readings/enforced_power_limit",
        "power_readings/power_limit",
    ):
        value = to_float(_xt(gpu, path))
        if value is not None:
            return value
    return None


def _x_remapped(gpu: Element) -> dict[str, Any] | None:
    block = gpu.find("remapped_rows")
    if block is None or len(block) == 0:
        return None  # "<remapped_rows>N/A</remapped_rows>"
    return remapped(
        yes_no(_xt(block, "remapped_row_pending")),
        yes_no(_xt(block, "remapped_row_failure")),
        to_int(_xt(block, "remapped_row_unc")),
        to_int(_xt(block, "remapped_row_corr")),
    )


# <ecc_errors><volatile|aggregate> children; v12 of R535 prints one sram_uncorrectable, v12 of R550+ and v13 split
# it into parity and SEC-DED; Volta-era logs nest <single_bit>/<double_bit> with a <total>.
_X_ECC = ("sram_correctable", "sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
          "dram_correctable", "dram_uncorrectable")


def _x_ecc_scope(scope: Element | None) -> dict[str, int | None]:
    if scope is None:
        return {}
    counts = {tag: to_int(_xt(scope, tag)) for tag in _X_ECC}
    counts["single_bit"] = to_int(_xt(scope, "single_bit/total"))
    counts["double_bit"] = to_int(_xt(scope, "double_bit/total"))
    return counts


def _x_ecc(gpu: Element) -> dict[str, Any] | None:
    block = gpu.find("ecc_errors")
    if block is None or len(block) == 0:
        return None
    flags = {tag: yes_no(_xt(block, tag)) for tag in ("channel_repair_pending", "tpc_repair_pending",
                                                        "unrepairable_memory")}
    flags["sram_threshold_exceeded"] = yes_no(_xt(block, "aggregate/sram_threshold_exceeded"))
    return ecc_errors(_x_ecc_scope(block.find("volatile")), _x_ecc_scope(block.find("aggregate")), flags)


def _x_retired(gpu: Element) -> dict[str, Any] | None:
    block = gpu.find("retired_pages")
    if block is None:
        return None
    pending = [yes_no(_xt(block, tag)) for tag in ("pending_retirement", "pending_blacklist")]
    return retired(
        to_int(_xt(block, "multiple_single_bit_retirement/retired_count")),
        to_int(_xt(block, "double_bit_retirement/retired_count")),
        True if True in pending else (False if False in pending else None),
    )


def _x_fabric(gpu: Element) -> dict[str, Any]:
    block = gpu.find("fabric")
    if block is None:
        return fabric_record()
    return fabric_record(
        state=_xt(block, "state"),
        status=_xt(block, "status"),
        clique_id=to_int(_xt(block, "cliqueId")),
        cluster_uuid=_xt(block, "clusterUuid"),
        health={k: _xt(block, f"health/{k}") for k in HEALTH_KEYS},
    )


def _x_gpu(index: int, gpu: Element) -> dict[str, Any]:
    link = gpu.find("pci/pci_gpu_link_info")
    return gpu_record(
        index,
        name=_xt(gpu, "product_name"),
        uuid=_xt(gpu, "uuid"),
        bus_id=_xt(gpu, "pci/pci_bus_id") or na(gpu.get("id")),
        pci_device_id=pci_device_id(_xt(gpu, "pci/pci_device_id")),
        vbios=_xt(gpu, "vbios_version"),
        architecture=_xt(gpu, "product_architecture"),
        persistence_mode=mode(_xt(gpu, "persistence_mode")),
        ecc_mode=mode(_xt(gpu, "ecc_mode/current_ecc")),
        mig_mode=mode(_xt(gpu, "mig_mode/current_mig")),
        mig_devices=len(gpu.findall("mig_devices/mig_device")) if gpu.find("mig_mode") is not None else None,
        power_limit_w=_x_power_limit(gpu),
        throttle_reasons=_x_reasons(gpu),
        pcie_gen=to_int(_xt(link, "pcie_gen/current_link_gen")),
        pcie_width=to_int(_xt(link, "link_widths/current_link_width")),
        remapped_rows=_x_remapped(gpu),
        ecc_errors=_x_ecc(gpu),
        retired_pages=_x_retired(gpu),
        recovery_action=_xt(gpu, "gpu_recovery_action"),
        fabric=_x_fabric(gpu),
    )


def parse_q_xml(text: str) -> dict[str, Any]:
    """Parse `nvidia-smi -q -x`; the DOCTYPE names an external DTD that is never loaded."""
    if not text.strip():
        raise ParseError("empty output")
    try:
        root = SafeET.fromstring(text)
    except (XMLSyntaxError, DefusedXmlException) as exc:
        raise ParseError(f"not nvidia-smi XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"unexpected XML root <{root.tag}>, expected <nvidia_smi_log>")
    gpus = [_x_gpu(i, g) for i, g in enumerate(root.findall("gpu"))]
    return gpu_fragment(
        gpus,
        driver_version=_xt(root, "driver_version"),
        cuda_version=_xt(root, "cuda_version"),
        attached_gpus=to_int(_xt(root, "attached_gpus")),
        notes=[],
    )


COLLECTORS = (
    Collector(
        id="nvidia_smi_q_xml",
        argv=tools.argv("nvidia_smi_q_xml"),
        parse=parse_q_xml,
        provides="/gpu",
        schema=GPU_SCHEMA,
        family="gpu",
        description="Same facts as nvidia_smi_q from the XML report (nvidia-smi -q -x).",
        default=False,
        corpus=("nvidia-smi-q-xml",),
    ),
)
