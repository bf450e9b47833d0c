"""sminfo, mlxlink and perfquery (issue 10.7) against the ib-diag and mlxlink corpus; P_Keys from sysfs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.ib.mlxlink import MLXLINK_SCRIPT, NOT_INSTALLED, parse_mlxlink
from fabricproof.collectors.ib.perfquery import parse_perfquery
from fabricproof.collectors.ib.sminfo import parse_sminfo
from fabricproof.collectors.ib.sysfs_counters import parse_ib_counters

from .iblib import COLLECTORS, parse, read

# --- sminfo -----------------------------------------------------------------------------------------------------------


def test_sminfo_master(corpus: Path) -> None:
    sm = parse(corpus, "ib-diag", "sminfo-master-lid37-prio14-mellanox-guid.txt", "sminfo")
    assert (sm["lid"], sm["guid"], sm["activity_count"], sm["priority"]) == (37, "0x7cfe90030016aef1", 4484381, 14)
    assert (sm["state"], sm["state_name"], sm["master"], sm["error"]) == (3, "SMINFO_MASTER", True, None)


def test_sminfo_that_cannot_open_its_port_proves_nothing_about_the_sm(corpus: Path) -> None:
    # run unprivileged: libibmad cannot open the umad port, so nobody was asked (not "no SM")
    sm = parse(corpus, "ib-diag", "sminfo-FAIL-ibwarn-cant-open-umad-port-iberror.txt", "sminfo")
    assert sm["master"] is None and sm["state"] is None
    assert sm["error"] == "sminfo: iberror: failed: Failed to open '(null)' port '0'"
    assert any("could not open the local InfiniBand port" in n for n in sm["notes"])


@pytest.mark.parametrize(
    ("text", "master", "state_name"),
    [
        # infiniband-diags prints its query failure as "sminfo: iberror: failed: query" (the OFED README's example)
        ("sminfo: iberror: failed: query\n", False, None),
        ("ibwarn: [4121] _do_madrpc: recv failed: Connection timed out\nsminfo: iberror: failed: query\n", False, None),
        ("sminfo: sm lid 3 sm guid 0x7cfe90030016aef1, activity count 12 priority 15 state 2 SMINFO_STANDBY\n",
         False, "SMINFO_STANDBY"),
        # older infiniband-diags print no state: not judged
        ("sminfo: sm lid 0x1 sm guid 0x2c9010b7c2ae1, activity count 20 priority 1\n", None, None),
    ],
)
def test_sminfo_states_and_unanswered_queries(text: str, master: bool | None, state_name: str | None) -> None:
    sm = parse_sminfo(text)
    assert (sm["master"], sm["state_name"]) == (master, state_name)


@pytest.mark.parametrize("text", ["", "hello\n", "sh: 1: exec: sminfo: not found\n"])
def test_sminfo_rejects_other_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_sminfo(text)


# --- mlxlink ----------------------------------------------------------------------------------------------------------

MLXLINK_FILES = {
    "mlxlink-bf3-fw32.47.1088-ib-edr-ll-rs-fec.txt": ("IB-EDR", "4x", "Standard LL RS-FEC - RS(271,257)", "32.47.1088"),
    "mlxlink-cx7-eth-100g-rs-fec-fw28.47.1088-aerial.txt": ("100G", "4x", "Standard RS-FEC - RS(528,514)", "28.47.1088"),
    "mlxlink-show_mo-cx7-ib-ndr-osfp-passive-copper-fw28.46.3048.txt": (
        "IB-NDR", "4x", "Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1)", "28.46.3048"),
}


@pytest.mark.parametrize("name", sorted(MLXLINK_FILES))
def test_mlxlink_link_fec_and_firmware(corpus: Path, name: str) -> None:
    frag = parse(corpus, "mlxlink", name, "mlxlink")
    (dev,) = frag["devices"]
    assert (dev["speed"], dev["width"], dev["fec"], dev["firmware"]) == MLXLINK_FILES[name]
    assert (dev["state"], dev["physical_state"], dev["recommendation"]) == ("Active", "LinkUp", "No issue was observed")
    assert dev["device"] is None and frag["available"] is True  # a pasted output: no loop header


def test_mlxlink_module_info_of_an_osfp_copper_cable(corpus: Path) -> None:
    (dev,) = parse(corpus, "mlxlink", "mlxlink-show_mo-cx7-ib-ndr-osfp-passive-copper-fw28.46.3048.txt", "mlxlink")["devices"]
    assert dev["module"] == {
        "identifier": "OSFP", "compliance": "IB NDR", "cable_type": "Passive copper cable", "vendor_name": "FS",
        "vendor_part_number": "OSFPFL-400G-PC01", "vendor_serial_number": "C2604279049-2", "length_m": "1",
        "fw_version": None, "module_state": "Ready state"}


def test_mlxlink_degraded_hdr_width_and_an_unsupported_option(corpus: Path) -> None:
    name = "mlxlink-cx6-hdr-2x-rs-fec-544-514-plr-show_ber_monitor-E-not-supported-for-HCA.txt"
    frag = parse(corpus, "ib-diag", name, "mlxlink")
    (dev,) = frag["devices"]
    assert (dev["speed"], dev["width"], dev["fec"]) == ("IB-HDR", "2x", "RS-FEC - (544,514) + PLR")
    assert dev["errors"] == ['-E- "--show_ber_monitor" option is not supported for HCA']
    assert frag["notes"] == ['device: -E- "--show_ber_monitor" option is not supported for HCA']
    assert dev["effective_ber"] is None  # no counters section in this output: unknown


# The "Physical Counters and BER Info" layout of `mlxlink -c` (no such capture is in the corpus yet; values made up).
COUNTERS = """
Physical Counters and BER Info
------------------------------
Time Since Last Clear [Min]        : 25074.8
Effective Physical Errors          : 3
Effective Physical BER             : 2E-13
Raw Physical Errors Per Lane       : 0,12,0,0
Link Down Counter                  : 1
Link Error Recovery Counter        : 0
Raw Physical BER                   : 15E-255
"""


def test_mlxlink_loop_output_per_device(corpus: Path) -> None:
    ndr = read(corpus, "mlxlink", "mlxlink-show_mo-cx7-ib-ndr-osfp-passive-copper-fw28.46.3048.txt")
    frag = parse_mlxlink(f"=== mlx5_0\n{ndr}{COUNTERS}=== mlx5_1\n-E- Failed to open device: mlx5_1\n")
    first, second = frag["devices"]
    assert first["device"] == "mlx5_0" and first["effective_ber"] == 2e-13 and first["raw_ber"] == 15e-255
    assert (first["effective_errors"], first["link_down_counter"], first["link_error_recovery_counter"]) == (3, 1, 0)
    assert second["device"] == "mlx5_1" and second["state"] is None and second["errors"]
    assert frag["notes"] == ["mlx5_1: -E- Failed to open device: mlx5_1"]


@pytest.mark.skipif(__import__("shutil").which("mlxlink", path="/usr/bin:/bin") is not None,
                    reason="this machine has NVIDIA MFT installed: the not-installed answer cannot be shown here")
def test_mlxlink_not_installed_is_an_answer(tmp_path: Path) -> None:
    (tmp_path / "sys" / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "FABRICPROOF_HOST_ROOT": str(tmp_path)}  # no MFT on this machine's PATH
    out = subprocess.run(COLLECTORS["mlxlink"].argv, capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == NOT_INSTALLED
    assert parse_mlxlink(out.stdout) == {"available": False, "devices": [], "notes": [
        "mlxlink is not installed: link BER and cable not read"]}
    assert "mlxlink -d \"$d\" -m -c" in MLXLINK_SCRIPT


@pytest.mark.parametrize("text", ["", "hello world\n", "=== mlx5_0\n"])
def test_mlxlink_rejects_other_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_mlxlink(text)


# --- perfquery ---------------------------------------------------------------------------------------------------------


def test_perfquery_classic_and_extended(corpus: Path) -> None:
    hca = parse(corpus, "ib-diag", "perfquery-C-mlx5_0-cx6-hdr-a100-PortRcvSwitchRelayErrors-6.txt", "perfquery")
    (port,) = hca["ports"]
    assert (port["lid"], port["port"], port["extended"]) == (1, 0, False)
    assert port["counters"]["PortRcvSwitchRelayErrors"] == 6 and port["counters"]["SymbolErrorCounter"] == 0
    switch = parse(corpus, "misc", "perfquery-x-edr-switch-lid1719-ports1-2-treydock-fixture.txt", "perfquery")
    assert [(p["lid"], p["port"], p["extended"]) for p in switch["ports"]] == [(1719, 1, True), (1719, 2, True)]
    assert switch["ports"][0]["counters"]["PortXmitData"] == 36298026860928


# --- P_Keys from sysfs ------------------------------------------------------------------------------------------------


def test_pkey_tables_are_read_without_their_empty_entries(tmp_path: Path) -> None:
    port = tmp_path / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    (port / "pkeys").mkdir(parents=True)
    for attr, value in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"),
                        ("link_layer", "InfiniBand")):
        (port / attr).write_text(value + "\n")
    for i in range(128):  # the kernel's table: 128 files, the unused ones 0x0000
        (port / "pkeys" / str(i)).write_text({0: "0xffff", 5: "0x8001"}.get(i, "0x0000") + "\n")
    env = {**os.environ, "FABRICPROOF_HOST_ROOT": str(tmp_path), "LC_ALL": "C"}
    out = subprocess.run(COLLECTORS["ib_counters"].argv, capture_output=True, text=True, env=env, timeout=30,
                         check=True).stdout
    assert out.count("/pkeys/") == 2
    (got,) = parse_ib_counters(out)["ports"]
    assert got["pkeys"] == ["0xffff", "0x8001"]


def test_a_capture_without_pkeys_lines_leaves_them_unknown(corpus: Path) -> None:
    ports = parse(corpus, "sysfs-infiniband", "gpud-h100-node-8x-cx7-ndr-plus-bond.txt", "ib_counters")["ports"]
    assert {p["pkeys"] is None for p in ports} == {True}


@pytest.mark.parametrize("text", ["", "hello world\n", "PortSelect:......1\n"])
def test_perfquery_rejects_other_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_perfquery(text)
