"""NVSwitch parsers: every nvswitch/lspci corpus file, NVSwitch counts per platform, nvfwupd and Redfish inventories."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fabricproof.collectors import COLLECTORS
from fabricproof.collectors.nvswitch import firmware as nvswitch_firmware
from fabricproof.collectors.nvswitch import pci as nvswitch_pci
from fabricproof.collectors.base import Collector, ParseError
from fabricproof.collectors.nvswitch.firmware import parse_nvfwupd
from fabricproof.collectors.nvswitch.pci import parse_nvswitch_pci

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
NVSWITCH_COLLECTORS = (*nvswitch_pci.COLLECTORS, *nvswitch_firmware.COLLECTORS)

# Which collector reads each nvswitch corpus file (first match wins); unrouted files fail.
NVSWITCH_ROUTES = (
    ("dmesg-*", "kernel_log"),
    ("fm-log-*", "fm_log"),
    ("lspci-*", "nvswitch_pci"),
)


def listing(family: str) -> list[str]:
    folder = CORPUS / family
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def route(name: str) -> str | None:
    return next((cid for pattern, cid in NVSWITCH_ROUTES if fnmatch(name, pattern)), None)


def read(corpus: Path, rel: str) -> str:
    return (corpus / rel).read_text(encoding="utf-8", errors="surrogateescape")


@pytest.mark.parametrize("name", listing("nvswitch"))
def test_every_nvswitch_file_parses_and_matches_schema(corpus: Path, name: str) -> None:
    collector_id = route(name)
    assert collector_id, f"no parser routed for corpus file nvswitch/{name}"
    collector = COLLECTORS[collector_id]
    assert_valid(collector.schema, collector.parse(read(corpus, f"nvswitch/{name}")))


@pytest.mark.parametrize("name", listing("lspci"))
def test_every_lspci_file_counts_nvswitches(corpus: Path, name: str) -> None:
    assert_valid(COLLECTORS["nvswitch_pci"].schema, parse_nvswitch_pci(read(corpus, f"lspci/{name}")))


def test_collectors_match_contract() -> None:
    assert_collector_table(
        NVSWITCH_COLLECTORS,
        {
            "nvswitch_pci": (("lspci", "-n", "-d", "10de:"), "/nvswitch/pci", True),
            "nvswitch_firmware": (
                ("nvfwupd", "-c", "/etc/fabricproof/nvfwupd.yaml", "show_version"),
                "/nvswitch/firmware",
                True,
            ),
        },
    )
    # BMC credentials come from the config file, never from argv
    fw = COLLECTORS["nvswitch_firmware"]
    assert not any(word in arg for arg in fw.argv for word in ("password", "user=", "ip="))


@pytest.mark.parametrize("collector", NVSWITCH_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


# ---------------------------------------------------------------- NVSwitch count per platform


@pytest.mark.parametrize(
    ("rel", "count", "ids", "gpus"),
    [
        ("lspci/lspci-nn-azure-a100-sxm4-nvswitch-bridges-cx6-vf.txt", 6, ["1af1"], 8),
        ("nvswitch/lspci-nn-azure-a100-6x-nvswitch-1af1-excerpt.txt", 6, ["1af1"], 0),
        ("nvswitch/lspci-header-lines-nvidia-hgx-h100-8gpu-4nvswitch-22a3-excerpt.txt", 4, ["22a3"], 8),
        # Grace root ports are NVIDIA "PCI bridge"s (class 0604), not NVSwitches: none visible on a GB200 tray
        ("lspci/lspci-gb200-compute-tray-cx7-bf3.txt", 0, [], 4),
    ],
)
def test_nvswitch_count(corpus: Path, rel: str, count: int, ids: list[str], gpus: int) -> None:
    frag = parse_nvswitch_pci(read(corpus, rel))
    assert (frag["count"], frag["device_ids"], frag["gpu_count"]) == (count, ids, gpus)
    assert len(frag["devices"]) == count


def test_hgx_h100_nvswitch_addresses(corpus: Path) -> None:
    frag = parse_nvswitch_pci(read(corpus, "nvswitch/lspci-header-lines-nvidia-hgx-h100-8gpu-4nvswitch-22a3-excerpt.txt"))
    assert [d["bdf"] for d in frag["devices"]] == ["83:00.0", "84:00.0", "85:00.0", "86:00.0"]


def test_numeric_lspci_n_form() -> None:
    # what the collector's own argv prints: `lspci -n -d 10de:`
    text = "0001:00:00.0 0302: 10de:20b2 (rev a1)\n0005:00:00.0 0680: 10de:1af1 (rev a1)\n0006:00:00.0 0680: 10de:1af1 (rev a1)\n"
    frag = parse_nvswitch_pci(text)
    assert frag == {
        "count": 2,
        "devices": [{"bdf": "0005:00:00.0", "device_id": "1af1"}, {"bdf": "0006:00:00.0", "device_id": "1af1"}],
        "device_ids": ["1af1"],
        "gpu_count": 1,
    }


def test_filtered_listing_without_nvidia_devices_is_empty() -> None:
    assert parse_nvswitch_pci("")["count"] == 0


@pytest.mark.parametrize("text", ["lspci: command not found\n", "hello\nworld\n", "{}"])
def test_nvswitch_pci_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_nvswitch_pci(text)


# ---------------------------------------------------------------- nvfwupd / Redfish firmware inventory

# `nvfwupd -c config.yaml show_version` table as documented in
# https://docs.nvidia.com/dgx/dgxh100-fw-update-guide/view-fw-components-packages.html and
# https://docs.nvidia.com/dgx/dgxb200-fw-update-guide/gpu-tray-sample-config.html (header, dashes, Yes/No);
# HGX_FW_* component names and versions as observed on HGX H100 baseboards (domain.md A.3).
NVFWUPD_TEXT = """System Model: DGXH100
Part number: xxx-xxxxx-xxxx-xxx
Serial number: xxxxxxxxxxxxx
Packages: ['HGX-H100x8_0014_250724.1.0']
Connection Status: Successful

Firmware Devices:
AP Name                        Sys Version                    Pkg Version                    Up-To-Date
-------                        -----------                    -----------                    ----------
HGX_FW_ERoT_NVSwitch_0         00.02.0100.0000_n00            00.02.0100.0000_n00            Yes
HGX_FW_FPGA_0                  2.0A                           2.0A                           Yes
HGX_FW_GPU_SXM_10              96.00.70.00.01                 96.00.70.00.01                 Yes
HGX_FW_GPU_SXM_2               96.00.70.00.01                 96.00.70.00.01                 Yes
HGX_FW_GPU_SXM_1               96.00.70.00.01                 96.00.70.00.01                 Yes
HGX_FW_NVSwitch_0              96.00.3F.00.01                 96.10.4A.00.01                 No
HGX_FW_NVSwitch_1              96.00.3F.00.01                 96.10.4A.00.01                 No
HGX_FW_NVSwitch_2              96.00.3F.00.01                 96.10.4A.00.01                 No
HGX_FW_NVSwitch_3              96.00.3F.00.01                 96.10.4A.00.01                 No
HGX_FW_PCIeRetimer_0           2.7.0                          N/A                            No
"""


def test_nvfwupd_text() -> None:
    frag = parse_nvfwupd(NVFWUPD_TEXT)
    assert_valid(COLLECTORS["nvswitch_firmware"].schema, frag)
    assert frag["source"] == "nvfwupd" and frag["system_model"] == "DGXH100"
    assert frag["nvswitch_versions"] == ["96.00.3F.00.01"] * 4  # HGX_FW_ERoT_NVSwitch_0 is the ERoT, not the switch
    # natural order: SXM_1, SXM_2, SXM_10
    assert [c["name"] for c in frag["components"] if c["name"].startswith("HGX_FW_GPU_")] == [
        "HGX_FW_GPU_SXM_1",
        "HGX_FW_GPU_SXM_2",
        "HGX_FW_GPU_SXM_10",
    ]
    assert frag["gpu_versions"] == ["96.00.70.00.01"] * 3
    nvsw0 = next(c for c in frag["components"] if c["name"] == "HGX_FW_NVSwitch_0")
    assert nvsw0 == {
        "name": "HGX_FW_NVSwitch_0",
        "version": "96.00.3F.00.01",
        "package_version": "96.10.4A.00.01",
        "up_to_date": False,
    }
    retimer = next(c for c in frag["components"] if c["name"] == "HGX_FW_PCIeRetimer_0")
    assert retimer["package_version"] is None and retimer["up_to_date"] is False
    assert frag["versions"]["HGX_FW_FPGA_0"] == "2.0A"


def test_nvfwupd_text_with_short_dash_row() -> None:
    # GH200 example in https://docs.nvidia.com/multi-node-nvlink-systems/nvfupd-guide/appendix/unknown-errors.html:
    # a blank line before the header and no dashes under Up-To-Date
    text = (
        "System Model: P3809\nFirmware Devices:\n\n"
        "AP Name            Sys Version         Pkg Version         Up-To-Date\n"
        "-------            -----------         -----------\n"
        "HGX_CPU_0          01.02.00            01.02.04            No\n"
        "HGX_ERoT_CPU_0     01.03.0131.0000_n01 01.03.0136.0000_n01 No\n"
    )
    frag = parse_nvfwupd(text)
    assert [(c["name"], c["version"], c["package_version"]) for c in frag["components"]] == [
        ("HGX_CPU_0", "01.02.00", "01.02.04"),
        ("HGX_ERoT_CPU_0", "01.03.0131.0000_n01", "01.03.0136.0000_n01"),
    ]


def test_nvfwupd_json_output() -> None:
    # `show_version -j` shape from https://docs.nvidia.com/multi-node-nvlink-systems/nvfupd-guide/appendix/json-options.html
    doc = {
        "Connection Status": "Successful",
        "System Model": "DGXH100",
        "Packages": ["DGX_0003_241205.1.0_custom"],
        "Firmware Devices": [
            {"AP Name": "CPLDMB_0", "Sys Version": "0.2.1.8", "Pkg Version": "N/A", "Up-To-Date": "No"},
            {
                "AP Name": "HGX_FW_NVSwitch_1",
                "Sys Version": "96.10.4A.00.01",
                "Pkg Version": "96.10.4A.00.01",
                "Up-To-Date": "Yes",
            },
        ],
    }
    frag = parse_nvfwupd(json.dumps(doc, indent=4))
    assert_valid(COLLECTORS["nvswitch_firmware"].schema, frag)
    assert frag["nvswitch_versions"] == ["96.10.4A.00.01"]
    assert frag["components"][0]["up_to_date"] is False and frag["components"][1]["up_to_date"] is True


# Redfish SoftwareInventoryCollection with expanded Members (DMTF SoftwareInventory schema,
# https://redfish.dmtf.org/schemas/v1/SoftwareInventory.json; NVIDIA BMC FirmwareInventory per
# https://docs.nvidia.com/networking/display/nvidiaswitchbmcusermanualv8800021301/user+interface+redfish+commands).
REDFISH = {
    "@odata.id": "/redfish/v1/UpdateService/FirmwareInventory",
    "@odata.type": "#SoftwareInventoryCollection.SoftwareInventoryCollection",
    "Name": "Software Inventory Collection",
    "Members@odata.count": 3,
    "Members": [
        {
            "@odata.id": f"/redfish/v1/UpdateService/FirmwareInventory/{name}",
            "@odata.type": "#SoftwareInventory.v1_4_0.SoftwareInventory",
            "Id": name,
            "Name": "Software Inventory",
            "Updateable": True,
            "Version": version,
            "Status": {"Health": "OK", "State": "Enabled"},
        }
        for name, version in (
            ("HGX_FW_NVSwitch_1", "96.10.6D.00.01"),
            ("HGX_FW_NVSwitch_0", "96.10.6D.00.01"),
            ("HGX_FW_GPU_SXM_1", "96.00.D0.00.03"),
        )
    ],
}


def test_redfish_firmware_inventory() -> None:
    frag = parse_nvfwupd(json.dumps(REDFISH))
    assert_valid(COLLECTORS["nvswitch_firmware"].schema, frag)
    assert frag["source"] == "redfish"
    assert [c["name"] for c in frag["components"]] == ["HGX_FW_GPU_SXM_1", "HGX_FW_NVSwitch_0", "HGX_FW_NVSwitch_1"]
    assert frag["nvswitch_versions"] == ["96.10.6D.00.01", "96.10.6D.00.01"]
    assert frag["gpu_versions"] == ["96.00.D0.00.03"]
    assert all(c["package_version"] is None and c["up_to_date"] is None for c in frag["components"])


def test_redfish_unexpanded_collection_gives_names_without_versions() -> None:
    doc = {"Members": [{"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory/HGX_FW_NVSwitch_0"}]}
    frag = parse_nvfwupd(json.dumps(doc))
    assert frag["components"] == [{"name": "HGX_FW_NVSwitch_0", "version": None, "package_version": None, "up_to_date": None}]
    assert frag["nvswitch_versions"] == []


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Error: Unable to connect to the BMC at 192.0.2.1\n",
        "System Model: DGXH100\nFirmware Devices:\nAP Name    Sys Version\n-------    -----------\n",
        "{not json",
        '{"error": {"code": "Base.1.8.GeneralError"}}',
    ],
)
def test_nvfwupd_rejects_unreadable_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_nvfwupd(text)
