"""Renderers of nvidia-smi output (-q, -q -x, --query-gpu, -L) and /proc/driver/nvidia/version."""

from __future__ import annotations

import time
from collections.abc import Callable

from fabricproof import tools

from .model import Node, branch_of, installed_driver, profile_of
from .profiles import CUDA_BY_BRANCH

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

# One entry of the -q tree, shared by the text and XML renderers so both always agree:
# (text label or None for XML-only, XML tag or None for text-only, value str | list of entries).
# A value may also be a (text, xml) pair where the two forms spell it differently.
Entry = tuple[str | None, str | None, "Any"]

NVML_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\n"

_THROTTLE_ORDER = (
    ("Idle", "gpu_idle", "clocks_event_reason_gpu_idle", 0),
    ("Applications Clocks Setting", "applications_clocks_setting",
     "clocks_event_reason_applications_clocks_setting", 0),
    ("SW Power Cap", "sw_power_cap", "clocks_event_reason_sw_power_cap", 0),
    ("HW Slowdown", "hw_slowdown", "clocks_event_reason_hw_slowdown", 0),
    ("HW Thermal Slowdown", "hw_thermal_slowdown", "clocks_event_reason_hw_thermal_slowdown", 1),
    ("HW Power Brake Slowdown", "hw_power_brake_slowdown", "clocks_event_reason_hw_power_brake_slowdown", 1),
    ("Sync Boost", "sync_boost", "clocks_event_reason_sync_boost", 0),
    ("SW Thermal Slowdown", "sw_thermal_slowdown", "clocks_event_reason_sw_thermal_slowdown", 0),
    ("Display Clock Setting", "display_clocks_setting", "clocks_event_reason_display_clocks_setting", 0),
)
THROTTLE_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
                 "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
                 "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100}


#: The per-scope ECC counter lines of R550+ data-center boards (corpus q-h100-...-590, a40-...-550).
_ECC_COUNTERS = (("SRAM Correctable", "sram_correctable"), ("SRAM Uncorrectable Parity", "sram_uncorrectable_parity"),
                 ("SRAM Uncorrectable SEC-DED", "sram_uncorrectable_secded"),
                 ("DRAM Correctable", "dram_correctable"), ("DRAM Uncorrectable", "dram_uncorrectable"))


def smi_branch(view: Node) -> int:
    """Major branch of the nvidia-smi binary (user space): decides the output layout."""
    return int(branch_of(installed_driver(view) or view["driver"]["loaded"]))


def smi_timestamp(view: Node) -> str:
    """nvidia-smi's Timestamp line value."""
    return time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(view["clock"]))


def _na(v: Any) -> str:
    return "N/A" if v is None else str(v)


def _yes(b: bool) -> str:
    return "Yes" if b else "No"


def _watts(w: float) -> str:
    return f"{w:.2f} W"


def _fabric(view: Node, gpu: dict[str, Any], br: int) -> list[Entry]:
    fab = gpu["fabric"]
    out: list[Entry] = [("State", "state", _na(fab["state"])), ("Status", "status", _na(fab["status"]))]
    if br >= 550:
        out += [("CliqueId", "cliqueId", _na(fab["clique_id"])), ("ClusterUUID", "clusterUuid", _na(fab["cluster_uuid"]))]
    health = fab.get("health") or {}
    if br >= 580:
        keys = [("Summary", "summary"), ("Bandwidth", "bandwidth"),
                ("Route Recovery in progress", "route_recovery_in_progress"), ("Route Unhealthy", "route_unhealthy"),
                ("Access Timeout Recovery", "access_timeout_recovery"),
                ("Incorrect Configuration", "incorrect_configuration")]
        entries: list[Entry] = [(label, key, _na(health.get(key))) for label, key in keys]
        entries.append((None, "partition_assigned", "N/A"))
        out.append(("Health", "health", entries))
    elif br >= 570:
        keys = [("Bandwidth", "bandwidth"), ("Route Recovery in progress", "route_recovery_in_progress"),
                ("Route Unhealthy", "route_unhealthy"), ("Access Timeout Recovery", "access_timeout_recovery")]
        out.append(("Health", "health", [(label, key, _na(health.get(key))) for label, key in keys]))
    return out


def gpu_entries(view: Node, gpu: dict[str, Any]) -> list[Entry]:
    """The -q tree of one GPU (layout of the installed nvidia-smi branch)."""
    p = profile_of(view)
    g = p["gpu"]
    br = smi_branch(view)
    new = br >= 570
    drv = installed_driver(view) or view["driver"]["loaded"]
    dom, bus = gpu["domain"], gpu["bus"]
    throttle = set(gpu["throttle_reasons"])
    gb = p["arch"] == "aarch64"
    e: list[Entry] = [
        ("Product Name", "product_name", g["model"]),
        ("Product Brand", "product_brand", "NVIDIA"),
        ("Product Architecture", "product_architecture", g["architecture"]),
        ("Display Mode", "display_mode", "Requested functionality has been deprecated" if new else "Enabled"),
    ]
    if new:
        e.append(("Display Attached", "display_attached", "Yes"))
    e += [
        ("Display Active", "display_active", "Disabled"),
        ("Persistence Mode", "persistence_mode", gpu["persistence_mode"]),
        ("Addressing Mode", "addressing_mode", "ATS" if gb else "None"),
        ("MIG Mode", "mig_mode", [("Current", "current_mig", "Disabled"), ("Pending", "pending_mig", "Disabled")]),
        (None, "mig_devices", "None"),
        ("Accounting Mode", "accounting_mode", "Disabled"),
        ("Accounting Mode Buffer Size", "accounting_mode_buffer_size", "4000"),
        ("Driver Model", "driver_model", [("Current", "current_dm", "N/A"), ("Pending", "pending_dm", "N/A")]),
        ("Serial Number", "serial", gpu["serial"]),
        ("GPU UUID", "uuid", gpu["uuid"]),
    ]
    if new:
        e.append(("GPU PDI", "pdi", "0x" + gpu["uuid"].replace("-", "")[-16:]))
    e += [
        ("Minor Number", "minor_number", str(gpu["index"])),
        ("VBIOS Version", "vbios_version", gpu["vbios"]),
        ("MultiGPU Board", "multigpu_board", "No"),
        ("Board ID", "board_id", f"0x{int(bus, 16):x}00"),
        ("Board Part Number", "board_part_number", g["board_part_number"]),
        ("GPU Part Number", "gpu_part_number", g["gpu_part_number"]),
        ("FRU Part Number", "gpu_fru_part_number", "N/A"),
    ]
    if new:
        e.append(("Platform Info", "platformInfo", [
            ("Chassis Serial Number", "chassis_serial_number", "N/A"),
            ("Slot Number", "slot_number", "N/A"),
            ("Tray Index", "tray_index", "N/A"),
            ("Host ID", "host_id", "N/A"),
            ("Peer Type", "peer_type", "Switch Connected" if gb else "N/A"),
            ("Module Id", "module_id", str(gpu["module_id"])),
            ("GPU Fabric GUID", "gpu_fabric_guid", "N/A"),
        ]))
    else:
        e.append(("Module ID", "gpu_module_id", str(gpu["module_id"])))
    e += [
        ("Inforom Version", "inforom_version", [
            ("Image Version", "img_version", g["inforom_image"]), ("OEM Object", "oem_object", "2.1"),
            ("ECC Object", "ecc_object", "7.16" if g["architecture"] != "Ampere" else "6.16"),
            ("Power Management Object", "pwr_object", "N/A")]),
        ("Inforom BBX Object Flush", "inforom_bbx_flush", [
            ("Latest Timestamp", "latest_timestamp", "N/A"), ("Latest Duration", "latest_duration", "N/A")]),
        ("GPU Operation Mode", "gpu_operation_mode", [("Current", "current_gom", "N/A"), ("Pending", "pending_gom", "N/A")]),
    ]
    if new:
        e.append(("GPU C2C Mode", "c2c_mode", "Enabled" if gb else "Disabled"))
    e.append(("GPU Virtualization Mode", "gpu_virtualization_mode",
              [("Virtualization Mode", "virtualization_mode", "None"), ("Host VGPU Mode", "host_vgpu_mode", "N/A")]
              + ([("vGPU Heterogeneous Mode", "vgpu_heterogeneous_mode", "N/A")] if new else [])))
    if new:
        e.append(("GPU Recovery Action", "gpu_recovery_action", gpu.get("recovery_action") or "None"))
    e.append(("GSP Firmware Version", "gsp_firmware_version", drv))
    if not new:
        e.append(("GPU Reset Status", "gpu_reset_status", [
            ("Reset Required", "reset_required", "No"),
            ("Drain and Reset Recommended", "drain_and_reset_recommended", "No")]))
    e.append(("IBMNPU", "ibmnpu", [("Relaxed Ordering Mode", "relaxed_ordering_mode", "N/A")]))
    # Text and XML spell PCI numbers differently ("0x19" vs "19"): (text, xml) value pairs.
    pci: list[Entry] = [
        ("Bus", "pci_bus", (f"0x{bus.upper()}", bus.upper())),
        ("Device", "pci_device", ("0x00", "00")),
        ("Domain", "pci_domain", (f"0x{dom.upper()}", dom.upper())),
    ]
    if new:
        pci += [("Base Classcode", "pci_base_class", ("0x3", "3")), ("Sub Classcode", "pci_sub_class", ("0x2", "2"))]
    device_id = f"{g['pci_device_id'].upper()}10DE"
    pci += [
        ("Device Id", "pci_device_id", (f"0x{device_id}", device_id)),
        ("Bus Id", "pci_bus_id", gpu["bus_id"]),
        ("Sub System Id", "pci_sub_system_id", (g["subsystem_id"], g["subsystem_id"][2:])),
        ("GPU Link Info", "pci_gpu_link_info", [
            ("PCIe Generation", "pcie_gen", [
                ("Max", "max_link_gen", str(g["pcie_gen"])),
                ("Current", "current_link_gen", str(gpu["pcie_gen"])),
                ("Device Current", "device_current_link_gen", str(gpu["pcie_gen"])),
                ("Device Max", "max_device_link_gen", str(g["pcie_gen"])),
                ("Host Max", "max_host_link_gen", str(g["pcie_gen"])),
            ]),
            ("Link Width", "link_widths", [
                ("Max", "max_link_width", f"{g['pcie_width']}x"),
                ("Current", "current_link_width", f"{gpu['pcie_width']}x"),
            ]),
        ]),
        ("Bridge Chip", "pci_bridge_chip", [("Type", "bridge_chip_type", "N/A"), ("Firmware", "bridge_chip_fw", "N/A")]),
        ("Replays Since Reset", "replay_counter", "0"),
        ("Replay Number Rollovers", "replay_rollover_counter", "0"),
        ("Tx Throughput", "tx_util", "0 KB/s"),
        ("Rx Throughput", "rx_util", "0 KB/s"),
        ("Atomic Caps Inbound", "atomic_caps_inbound", "N/A"),
        ("Atomic Caps Outbound", "atomic_caps_outbound", "FETCHADD_32 FETCHADD_64 SWAP_32 SWAP_64 CAS_32 CAS_64"),
    ]
    e.append(("PCI", "pci", pci))
    e += [("Fan Speed", "fan_speed", "N/A"), ("Performance State", "performance_state", "P0")]
    reasons: list[Entry] = []
    for label, key, tag, depth in _THROTTLE_ORDER:
        value = "Active" if key in throttle else "Not Active"
        reasons.append((("\t" * depth) + label, tag, value))
    e.append(("Clocks Event Reasons", "clocks_event_reasons", reasons))
    if new:
        e.append(("Clocks Event Reasons Counters", "clocks_event_reasons_counters", [
            ("SW Power Capping", "clocks_event_reasons_counters_sw_power_cap", "0 us"),
            ("Sync Boost", "clocks_event_reasons_counters_sync_boost", "0 us"),
            ("SW Thermal Slowdown", "clocks_event_reasons_counters_sw_therm_slowdown", "0 us"),
            ("HW Thermal Slowdown", "clocks_event_reasons_counters_hw_therm_slowdown", "0 us"),
            ("HW Power Braking", "clocks_event_reasons_counters_hw_power_brake", "0 us")]))
    mem = g["memory_mib"]
    e += [
        ("Sparse Operation Mode", "sparse_operation_mode", "Disabled"),
        ("FB Memory Usage", "fb_memory_usage", [
            ("Total", "total", f"{mem} MiB"), ("Reserved", "reserved", "551 MiB"), ("Used", "used", "0 MiB"),
            ("Free", "free", f"{mem - 551} MiB")]),
        ("BAR1 Memory Usage", "bar1_memory_usage", [
            ("Total", "total", "131072 MiB"), ("Used", "used", "1 MiB"), ("Free", "free", "131071 MiB")]),
        ("Conf Compute Protected Memory Usage", "cc_protected_memory_usage", [
            ("Total", "total", "0 MiB"), ("Used", "used", "0 MiB"), ("Free", "free", "0 MiB")]),
        ("Compute Mode", "compute_mode", "Default"),
        ("Utilization", "utilization", [
            ("GPU" if new else "Gpu", "gpu_util", "0 %"), ("Memory", "memory_util", "0 %"),
            ("Encoder", "encoder_util", "0 %"), ("Decoder", "decoder_util", "0 %"),
            ("JPEG", "jpeg_util", "0 %"), ("OFA", "ofa_util", "0 %")]),
        ("Encoder Stats", "encoder_stats", [
            ("Active Sessions", "session_count", "0"), ("Average FPS", "average_fps", "0"),
            ("Average Latency", "average_latency", "0")]),
        ("FBC Stats", "fbc_stats", [
            ("Active Sessions", "session_count", "0"), ("Average FPS", "average_fps", "0"),
            ("Average Latency", "average_latency", "0")]),
    ]
    if new:
        e.append(("DRAM Encryption Mode", "dram_encryption_mode", [
            ("Current", "current_dram_encryption", "N/A"), ("Pending", "pending_dram_encryption", "N/A")]))
    ecc = gpu.get("ecc") or {}

    def counters(scope: str) -> list[Entry]:
        counts = ecc.get(scope) or {}
        return [(label, tag, str(counts.get(tag, 0))) for label, tag in _ECC_COUNTERS]

    ecc_errors: list[Entry] = [
        ("Volatile", "volatile", counters("volatile")),
        ("Aggregate", "aggregate", counters("aggregate") + [("SRAM Threshold Exceeded", "sram_threshold_exceeded", "No")]),
        ("Aggregate Uncorrectable SRAM Sources", "aggregate_uncorrectable_sram_sources", [
            ("SRAM L2", "sram_l2", "0"), ("SRAM SM", "sram_sm", "0"), ("SRAM Microcontroller", "sram_microcontroller", "0"),
            ("SRAM PCIE", "sram_pcie", "0"), ("SRAM Other", "sram_other", "0")]),
    ]
    if new:
        ecc_errors += [("Channel Repair Pending", "channel_repair_pending", "No"),
                       ("TPC Repair Pending", "tpc_repair_pending", "No"),
                       ("Unrepairable Memory", "unrepairable_memory", "No")]
    rr = gpu["remapped_rows"]
    e += [
        ("ECC Mode", "ecc_mode", [("Current", "current_ecc", gpu["ecc_mode"]), ("Pending", "pending_ecc", gpu["ecc_mode"])]),
        ("ECC Errors", "ecc_errors", ecc_errors),
        ("Retired Pages", "retired_pages", [
            ("Single Bit ECC", "multiple_single_bit_retirement", [(None, "retired_count", "N/A"), (None, "retired_pagelist", "N/A")]),
            ("Double Bit ECC", "double_bit_retirement", [(None, "retired_count", "N/A"), (None, "retired_pagelist", "N/A")]),
            ("Pending Page Blacklist", "pending_blacklist", "N/A"),
            (None, "pending_retirement", "N/A")]),
        ("Remapped Rows", "remapped_rows", [
            ("Correctable Error", "remapped_row_corr", str(rr["correctable"])),
            ("Uncorrectable Error", "remapped_row_unc", str(rr["uncorrectable"])),
            ("Pending", "remapped_row_pending", _yes(rr["pending"])),
            ("Remapping Failure Occurred", "remapped_row_failure", _yes(rr["failure"])),
            ("Bank Remap Availability Histogram", "row_remapper_histogram", [
                ("Max", "row_remapper_histogram_max", "2560 bank(s)"),
                ("High", "row_remapper_histogram_high", "0 bank(s)"),
                ("Partial", "row_remapper_histogram_partial", "0 bank(s)"),
                ("Low", "row_remapper_histogram_low", "0 bank(s)"),
                ("None", "row_remapper_histogram_none", "0 bank(s)")])]),
        ("Temperature", "temperature", [
            ("GPU Current Temp", "gpu_temp", "31 C"), ("GPU T.Limit Temp", "gpu_temp_tlimit", "56 C"),
            ("GPU Shutdown T.Limit Temp", "gpu_temp_max_tlimit_threshold", "-8 C"),
            ("GPU Slowdown T.Limit Temp", "gpu_temp_slow_tlimit_threshold", "-2 C"),
            ("GPU Max Operating T.Limit Temp", "gpu_temp_max_gpu_tlimit_threshold", "0 C"),
            ("GPU Target Temperature", "gpu_target_temperature", "N/A"),
            ("Memory Current Temp", "memory_temp", "39 C"),
            ("Memory Max Operating T.Limit Temp", "gpu_temp_max_mem_tlimit_threshold", "0 C")]),
    ]
    limit, lo = gpu["power_limit_w"], g["power_limit_min_w"]
    draw = [("Average Power Draw", "average_power_draw", "69.85 W"),
            ("Instantaneous Power Draw", "instant_power_draw", "69.62 W")] if new else [("Power Draw", "power_draw", "67.74 W")]
    e.append(("GPU Power Readings", "gpu_power_readings", draw + [
        ("Current Power Limit", "current_power_limit", _watts(limit)),
        ("Requested Power Limit", "requested_power_limit", _watts(limit)),
        ("Default Power Limit", "default_power_limit", _watts(g["power_limit_w"])),
        ("Min Power Limit", "min_power_limit", _watts(lo)),
        ("Max Power Limit", "max_power_limit", _watts(g["power_limit_w"]))]))
    na_draw = ([("Average Power Draw", "average_power_draw", "N/A"), ("Instantaneous Power Draw", "instant_power_draw", "N/A")]
               if new else [("Power Draw", "power_draw", "N/A")])
    e.append(("Module Power Readings", "module_power_readings", na_draw + [
        ("Current Power Limit", "current_power_limit", "N/A"), ("Requested Power Limit", "requested_power_limit", "N/A"),
        ("Default Power Limit", "default_power_limit", "N/A"), ("Min Power Limit", "min_power_limit", "N/A"),
        ("Max Power Limit", "max_power_limit", "N/A")]))
    e += [
        ("Clocks", "clocks", [("Graphics", "graphics_clock", "345 MHz"), ("SM", "sm_clock", "345 MHz"),
                              ("Memory", "mem_clock", "2619 MHz"), ("Video", "video_clock", "765 MHz")]),
        ("Applications Clocks", "applications_clocks", [("Graphics", "graphics_clock", "1980 MHz"),
                                                        ("Memory", "mem_clock", "2619 MHz")]),
        ("Default Applications Clocks", "default_applications_clocks", [("Graphics", "graphics_clock", "1980 MHz"),
                                                                        ("Memory", "mem_clock", "2619 MHz")]),
        ("Deferred Clocks", "deferred_clocks", [("Memory", "mem_clock", "N/A")]),
        ("Max Clocks", "max_clocks", [("Graphics", "graphics_clock", "1980 MHz"), ("SM", "sm_clock", "1980 MHz"),
                                      ("Memory", "mem_clock", "2619 MHz"), ("Video", "video_clock", "1545 MHz")]),
        ("Max Customer Boost Clocks", "max_customer_boost_clocks", [("Graphics", "graphics_clock", "1980 MHz")]),
        ("Clock Policy", "clock_policy", [("Auto Boost", "auto_boost", "N/A"), ("Auto Boost Default", "auto_boost_default", "N/A")]),
    ]
    if not new:
        e.append(("Voltage", "voltage", [("Graphics", "graphics_volt", "670.000 mV")]))
    e.append(("Fabric", "fabric", _fabric(view, gpu, br)))
    e.append(("Processes", "processes", "None"))
    if new:
        e.append(("Capabilities", "capabilities", [("EGM", "egm", "disabled")]))
    return e


def _text_lines(entries: list[Entry], depth: int, width: int, out: list[str]) -> None:
    for label, _tag, value in entries:
        if label is None:
            continue
        extra = label.count("\t")
        label = label.replace("\t", "")
        indent = "    " * (depth + extra)
        if isinstance(value, list):
            if any(child[0] is not None for child in value):
                out.append(indent + label)
                _text_lines(value, depth + 1, width, out)
            else:
                # XML-only children (retired page counts): the text form shows one summary value.
                out.append((indent + label).ljust(width) + ": N/A")
        else:
            text = value[0] if isinstance(value, tuple) else value
            out.append((indent + label).ljust(width) + ": " + text)


def render_q(view: Node) -> str:
    """`nvidia-smi -q` in the layout of the installed driver branch (535: 42 columns, 570+: 55)."""
    br = smi_branch(view)
    width = 55 if br >= 570 else 42
    drv = installed_driver(view) or view["driver"]["loaded"]
    out = ["", "==============NVSMI LOG==============", ""]
    out.append("Timestamp".ljust(width) + ": " + smi_timestamp(view))
    out.append("Driver Version".ljust(width) + ": " + drv)
    out.append("CUDA Version".ljust(width) + ": " + CUDA_BY_BRANCH.get(branch_of(drv), "N/A"))
    out.append("")
    out.append("Attached GPUs".ljust(width) + ": " + str(len(view["gpus"])))
    for n, gpu in enumerate(view["gpus"]):
        if n:
            out.append("")
        out.append("GPU " + gpu["bus_id"])
        _text_lines(gpu_entries(view, gpu), 1, width, out)
    return "\n".join(out) + "\n\n"


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _xml_lines(entries: list[Entry], depth: int, out: list[str]) -> None:
    tabs = "\t" * depth
    for _label, tag, value in entries:
        if tag is None:
            continue
        if isinstance(value, list):
            out.append(f"{tabs}<{tag}>")
            _xml_lines(value, depth + 1, out)
            out.append(f"{tabs}</{tag}>")
        elif tag == "mig_devices":
            # nvidia-smi writes this one element's text on its own line.
            out += [f"{tabs}<{tag}>", f"{tabs}\t{value}", f"{tabs}</{tag}>"]
        else:
            text = value[1] if isinstance(value, tuple) else value
            out.append(f"{tabs}<{tag}>{_xml_escape(text)}</{tag}>")


def render_q_xml(view: Node) -> str:
    """`nvidia-smi -q -x`: DTD v12 before R580, v13 from R580 (as in the corpus samples)."""
    br = smi_branch(view)
    drv = installed_driver(view) or view["driver"]["loaded"]
    out = ['<?xml version="1.0" ?>',
           f'<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v{13 if br >= 580 else 12}.dtd">',
           "<nvidia_smi_log>",
           f"\t<timestamp>{smi_timestamp(view)}</timestamp>",
           f"\t<driver_version>{drv}</driver_version>",
           f"\t<cuda_version>{CUDA_BY_BRANCH.get(branch_of(drv), 'N/A')}</cuda_version>",
           f"\t<attached_gpus>{len(view['gpus'])}</attached_gpus>"]
    for gpu in view["gpus"]:
        out.append(f'\t<gpu id="{gpu["bus_id"]}">')
        entries = [ent for ent in gpu_entries(view, gpu) if ent[1] != "processes"]
        _xml_lines(entries, 2, out)
        out += ["\t\t<processes>", "\t\t</processes>", "\t\t<accounted_processes>", "\t\t</accounted_processes>",
                "\t</gpu>"]
    out += ["", "</nvidia_smi_log>"]
    return "\n".join(out) + "\n"


#: The CSV headers nvidia-smi prints for the collector's --query-gpu fields where they are not the field's name.
_QUERY_HEADERS = {"power.limit": "power.limit [W]", "clocks_throttle_reasons.active": "clocks_event_reasons.active"}


def render_query_gpu(view: Node, fields: tuple[str, ...] = tools.QUERY_GPU_FIELDS) -> str:
    """`nvidia-smi --query-gpu=<fields> --format=csv` (header row, then one row per GPU)."""
    drv = installed_driver(view) or view["driver"]["loaded"]
    rows = [", ".join(_QUERY_HEADERS.get(f, f) for f in fields)]
    for gpu in view["gpus"]:
        mask = sum(THROTTLE_BITS[r] for r in gpu["throttle_reasons"] if r in THROTTLE_BITS)
        values = {
            "index": str(gpu["index"]), "pci.bus_id": gpu["bus_id"], "name": profile_of(view)["gpu"]["model"],
            "uuid": gpu["uuid"], "driver_version": drv, "vbios_version": gpu["vbios"],
            "persistence_mode": gpu["persistence_mode"], "ecc.mode.current": gpu["ecc_mode"],
            "power.limit": f"{gpu['power_limit_w']:.2f} W", "clocks_throttle_reasons.active": f"0x{mask:016X}",
            "pcie.link.gen.current": str(gpu["pcie_gen"]), "pcie.link.width.current": str(gpu["pcie_width"]),
            "fabric.state": _na(gpu["fabric"]["state"]), "fabric.status": _na(gpu["fabric"]["status"]),
        }
        rows.append(", ".join(values.get(f, "[N/A]") for f in fields))
    return "\n".join(rows) + "\n"


def render_list(view: Node) -> str:
    """`nvidia-smi -L`."""
    model = profile_of(view)["gpu"]["model"]
    return "".join(f"GPU {g['index']}: {model} (UUID: {g['uuid']})\n" for g in view["gpus"])


def render_proc_version(view: Node) -> str:
    """/proc/driver/nvidia/version of the loaded kernel module (corpus misc/proc-driver-nvidia-version-*)."""
    drv = view["driver"]["loaded"]
    arch = "aarch64" if profile_of(view)["arch"] == "aarch64" else "x86_64"
    flavour = "Open Kernel Module" if view["driver"]["kernel_module"] == "open" else "Kernel Module"
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(view["boot_time"] - 86400 * 30))
    gcc = "gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)"
    return (f"NVRM version: NVIDIA UNIX {flavour} for {arch}  {drv}  Release Build  (dvs-builder@U16-I3-B03-4-3)  "
            f"{stamp}\nGCC version:  {gcc}\n")


#: Output key (tools.TOOLS) -> renderer.
RENDERERS: dict[str, Callable[[Node], str]] = {
    "nvidia_smi_q": render_q, "nvidia_smi_q_xml": render_q_xml, "nvidia_smi_query_gpu": render_query_gpu,
    "nvsmi_list": render_list,
}
