"""Adapter firmware parsers (mlxfwmanager --query / mlxup / mlnx-fw-updater, flint / mstflint q) against the corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fabricproof.collectors.ib import flint, mlxfwmanager
from fabricproof.collectors.base import Collector, ParseError

from ..contract import assert_closed_and_described, assert_collector_table, assert_valid

# Same location as the `corpus` fixture (tests/conftest.py); only used to list files at collection time.
_CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus"
FW_COLLECTORS = (*mlxfwmanager.COLLECTORS, *flint.COLLECTORS)
COLLECTORS = {c.id: c for c in FW_COLLECTORS}
# The real message mlxfwmanager prints without root / mst (code index file id 20445052581, MFT 4.24 notes).
NO_DEVICES = "-E- No devices found or specified, mst might be stopped, run 'mst start' to load MST modules"


def _names(family: str) -> list[str]:
    folder = _CORPUS / family
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _read(corpus: Path, family: str, name: str) -> str:
    return (corpus / family / name).read_text(encoding="utf-8")


def _fw(corpus: Path, name: str) -> dict[str, Any]:
    fragment = mlxfwmanager.parse_mlxfwmanager(_read(corpus, "mlxfwmanager", name))
    assert_valid(mlxfwmanager.FIRMWARE_SCHEMA, fragment)
    return fragment


def _flint(corpus: Path, name: str) -> dict[str, Any]:
    fragment = flint.parse_flint(_read(corpus, "flint", name))
    assert_valid(flint.FLINT_SCHEMA, fragment)
    return fragment


# --- every corpus file parses and matches the schema ------------------------------------------------------------------


@pytest.mark.parametrize("name", _names("mlxfwmanager"))
def test_every_mlxfwmanager_file_parses(corpus: Path, name: str) -> None:
    f = _fw(corpus, name)
    assert f["count"] == len(f["devices"]) >= 1 and f["errors"] == []
    for d in f["devices"]:
        assert d["psid"] and d["device_type"] and d["fw_current"] and d["status"]
        assert d["versions"][0]["name"] == "FW"


@pytest.mark.parametrize("name", _names("flint"))
def test_every_flint_file_parses(corpus: Path, name: str) -> None:
    f = _flint(corpus, name)
    assert f["image_type"] in {"FS2", "FS3", "FS4"}
    assert f["fw_version"] and f["psid"] and f["product_version"] and f["base_guid"]
    assert f["rom_info"] and all(r["type"] for r in f["rom_info"])


def test_collector_table_matches_the_contract() -> None:
    assert_collector_table(
        FW_COLLECTORS,
        {
            "mlxfwmanager": (("mlxfwmanager", "--query"), "/ib/firmware", True),
            "flint": (("sh", "-c", flint.FLINT_SCRIPT), "/ib/flint", False),
        },
    )
    assert 'flint -d "$dev" q' in flint.FLINT_SCRIPT and 'mstflint -d "$dev" q' in flint.FLINT_SCRIPT
    assert COLLECTORS["mlxfwmanager"].corpus == ("mlxfwmanager",) and COLLECTORS["flint"].corpus == ("flint",)


@pytest.mark.parametrize("collector", FW_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


# --- mlxfwmanager ----------------------------------------------------------------------------------------------------


def test_cx7_device13_with_padded_version_columns(corpus: Path) -> None:
    (d,) = _fw(corpus, "mlxfwmanager-query-cx7-mcx755106as-hea-device13-excerpt.txt")["devices"]
    assert (d["index"], d["device_type"], d["part_number"]) == (13, "ConnectX7", "MCX755106AS-HEA_Ax")
    assert (d["psid"], d["fw_current"], d["fw_running"]) == ("MT_0000000834", "28.44.1036", "28.44.1036")
    assert d["fw_available"] is None and d["fw_activation_pending"] is False
    assert d["status"] == "No matching image found"
    assert d["pci_device"] == "/dev/mst/mt4129_pciconf0" and d["base_guid"] is None and d["base_mac"] == "605e65fd5b72"
    assert d["versions"] == [
        {"name": "FW", "current": "28.44.1036", "available": None},
        {"name": "PXE", "current": "3.7.0500", "available": None},
        {"name": "UEFI", "current": "14.37.0014", "available": None},
    ]


def test_running_firmware_differs_from_flash(corpus: Path) -> None:
    f = _fw(corpus, "mlxup-d-cx7-mcx75310aas-nea-osfp-fw-running-differs-up-to-date.txt")
    (d,) = f["devices"]
    assert (d["fw_running"], d["fw_current"], d["fw_available"]) == ("28.46.3048", "28.47.1026", "28.47.1026")
    assert d["fw_activation_pending"] is True and d["status"] == "Up to date"
    assert (d["psid"], d["base_guid"], d["pci_device"]) == ("MT_0000000838", "9c63c00300abed5a", "0000:8e:00.0")
    assert [v["name"] for v in d["versions"]] == ["FW", "FW (Running)", "PXE", "UEFI"]
    assert f["update_attempted"] is False


def test_update_transcript_after_the_query_is_not_a_device(corpus: Path) -> None:
    f = _fw(corpus, "mlxup-2x-cx7-mcx715105as-update-required-redhat-lab.txt")
    assert [d["index"] for d in f["devices"]] == [1, 2]  # "Device #1: Updating FW ..." is transcript
    assert {(d["fw_current"], d["fw_available"], d["status"]) for d in f["devices"]} == {
        ("28.42.1000", "28.43.1014", "Update required")
    }
    assert [d["pci_device"] for d in f["devices"]] == ["/dev/mst/mt4129_pciconf1", "/dev/mst/mt4129_pciconf0"]
    assert f["update_attempted"] is True and f["restart_needed"] is True


def test_updater_warning_is_kept(corpus: Path) -> None:
    f = _fw(corpus, "mlnx-fw-updater-cx6dx-mcx623106an-update-required-excerpt.txt")
    assert f["warnings"] == ["-W- DMA burning is not supported due to BME is unset (Bus primary Enable)."]
    (d,) = f["devices"]
    assert (d["psid"], d["fw_current"], d["fw_available"], d["base_guid"]) == (
        "MT_0000000359",
        "22.31.1014",
        "22.33.1048",
        "08c0eb0300a27bc8",
    )
    assert d["description"] == "ConnectX-6 Dx EN adapter card; 100GbE; Dual-port QSFP56; PCIe 4.0/3.0 x16;"


def test_unindented_updater_block(corpus: Path) -> None:
    f = _fw(corpus, "mlnx-fw-updater-query-dgx-spark-p4242-cx7-NVD0000000087-excerpt.txt")
    (d,) = f["devices"]
    assert (d["description"], d["psid"], d["fw_current"], d["fw_available"]) == (
        "NVIDIA DGX Spark P4242",
        "NVD0000000087",
        "28.45.4028",
        "28.47.1088",
    )
    assert f["update_attempted"] is False  # "Found 1 device(s) requiring..." alone burns nothing


def test_port_guids_instead_of_base_guid(corpus: Path) -> None:
    (d,) = _fw(corpus, "mlxfwmanager-query-hp-544plus-cx3pro-port-guids-clp-windows.txt")["devices"]
    assert d["base_guid"] is None and d["base_mac"] is None
    assert d["port_guids"] == ["9cdc71ffff5aae91", "9cdc71ffff5aae92"]
    assert {"name": "CLP", "current": "8025", "available": None} in d["versions"]
    assert (d["psid"], d["fw_current"], d["pci_device"]) == ("HP_1370110017", "2.42.5044", "mt4103_pci_cr0")


def test_mlxfwmanager_no_devices_and_garbage(corpus: Path) -> None:
    f = mlxfwmanager.parse_mlxfwmanager(NO_DEVICES + "\n")
    assert_valid(mlxfwmanager.FIRMWARE_SCHEMA, f)
    assert f["devices"] == [] and f["errors"] == [NO_DEVICES]
    for text in ("", "Querying Mellanox devices firmware ...\n", "hello\nworld\n"):
        with pytest.raises(ParseError):
            mlxfwmanager.parse_mlxfwmanager(text)
    with pytest.raises(ParseError):
        mlxfwmanager.parse_mlxfwmanager(_read(corpus, "flint", "flint-q-fs4-cx6dx-fw22.27.1016.txt"))


# --- flint -----------------------------------------------------------------------------------------------------------


def test_flint_fs4_secure_fw(corpus: Path) -> None:
    f = _flint(corpus, "cx7-mcx715105as-weat-fw28.43.1014-secure-fw-flint-query.txt")
    assert (f["image_type"], f["fw_version"], f["product_version"], f["psid"], f["security_attributes"]) == (
        "FS4",
        "28.43.1014",
        "28.43.1014",
        "MT_0000001244",
        "secure-fw",
    )
    assert (f["base_guid"], f["base_mac"]) == ("e09d730300126744", "e09d73126744")
    assert f["id_counts"] == {"base_guid": 16, "base_mac": 16}
    assert f["rom_info"] == [
        {"type": "UEFI", "version": "14.36.16", "cpu": "AMD64,AARCH64"},
        {"type": "PXE", "version": "3.7.500", "cpu": "AMD64"},
    ]
    assert f["description"] is None  # "Description: UID GuidsNumber" is the GUID table header


def test_flint_fs3_query_full_and_orig_base(corpus: Path) -> None:
    full = _flint(corpus, "flint-q-full-fs3-hpe-640sfp28-cx4lx-fw14.32.1908.txt")
    assert (full["part_number"], full["description"], full["default_update_method"]) == (
        "817753-B21_Ax",
        "HPE Ethernet 10/25Gb 2-port 640SFP28 Adapter",
        "fw_ctrl",
    )
    orig = _flint(corpus, "mstflint-q-fs3-cx4lx-orig-base-guid-fw14.32.1900.txt")
    assert orig["guids"] == {"base": "000030e3c0021f7a", "orig_base": None}
    assert orig["macs"] == {"base": "00e3c0021f7a", "orig_base": None}
    assert orig["id_counts"]["orig_base_guid"] == 4


def test_flint_fs2_guid_table_by_column(corpus: Path) -> None:
    f = _flint(corpus, "flint-query-full-fs2-hp-544plus-cx3pro-windows.txt")
    assert f["guids"] == {
        "node": "9cdc71ffff5aae90",
        "port1": "9cdc71ffff5aae91",
        "port2": "9cdc71ffff5aae92",
        "sys_image": "9cdc71ffff5aae93",
    }
    assert f["macs"] == {"port1": "9cdc715aae91", "port2": "9cdc715aae92"}  # MACs sit under Port1/Port2, not Node
    assert (f["device_id"], f["mic_version"], f["config_sectors"], f["prs_name"], f["vsd"]) == (
        "4103",
        "2.0.0",
        2,
        "cx3pro_hp_falcon_2p_fdr.prs",
        None,
    )
    assert [r["type"] for r in f["rom_info"]] == ["CLP", "UEFI", "PXE"] and f["rom_info"][0]["version"] == "8025"
    plain = _flint(corpus, "mstflint-q-fs2-connectx3pro-fw2.40.5032.txt")
    assert plain["macs"] == {"port1": "e41d2d1f28c0", "port2": "e41d2d1f28c1"} and plain["psid"] == "MT_1090111023"


def test_flint_errors_and_garbage(corpus: Path) -> None:
    # real mstflint failure on a ConnectX-3 (code index file id 52004034019)
    failed = (
        "FATAL - crspace read (0xf0014) failed: Invalid argument\n"
        "-E- Cannot open Device: 41:00.0. Invalid argument. MFE_GENERAL_ERROR\n"
    )
    with pytest.raises(ParseError, match="Cannot open Device: 41:00.0"):
        flint.parse_flint(failed)
    for text in ("", "hello world\n"):
        with pytest.raises(ParseError):
            flint.parse_flint(text)
    with pytest.raises(ParseError):
        flint.parse_flint(_read(corpus, "mlxfwmanager", "mlxfwmanager-cx4lx-mcx4131a-no-matching-image.txt"))
