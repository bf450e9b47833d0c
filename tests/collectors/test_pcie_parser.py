"""lspci -vvv parser: every lspci corpus file, bridge bus ranges, upstream paths and ACS on GPU/NIC paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabricproof.collectors import pcie
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.pcie import parse_lspci_vvv, split_bdf

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
HGX_VVV = "lspci/lspci-vvv-hgx-h100-excerpt-pex890xx-acs-off-pmc-sierra-acs-on-nvswitch-22a3.txt"


def listing(family: str) -> list[str]:
    folder = CORPUS / family
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def read(corpus: Path, rel: str) -> str:
    return (corpus / rel).read_text(encoding="utf-8", errors="surrogateescape")


def by_bdf(fragment: dict) -> dict[str, dict]:
    return {d["bdf"]: d for d in fragment["devices"]}


def test_collector_matches_contract() -> None:
    assert_collector_table(pcie.COLLECTORS, {"lspci_vvv": (("lspci", "-vvv"), "/pcie", True)})


def test_schema_is_closed_and_described() -> None:
    assert_closed_and_described(pcie.LSPCI_VVV.schema)


@pytest.mark.parametrize("name", listing("lspci"))
def test_every_lspci_file_parses_and_matches_schema(corpus: Path, name: str) -> None:
    frag = parse_lspci_vvv(read(corpus, f"lspci/{name}"))
    assert_valid(pcie.LSPCI_VVV.schema, frag)
    assert frag["devices"]
    assert all(b["is_bridge"] for b in frag["bridges"])


def test_hgx_h100_devices_and_ranges(corpus: Path) -> None:
    frag = parse_lspci_vvv(read(corpus, HGX_VVV))
    devs = by_bdf(frag)
    assert list(devs) == ["15:01.0", "16:00.0", "17:00.0", "17:01.0", "19:00.0", "1a:00.0", "82:00.0", "82:01.0", "83:00.0"]
    assert [b["bdf"] for b in frag["bridges"]] == ["15:01.0", "16:00.0", "17:00.0", "17:01.0", "82:00.0", "82:01.0"]
    assert (devs["15:01.0"]["secondary_bus"], devs["15:01.0"]["subordinate_bus"]) == (0x16, 0x1C)
    assert (devs["17:01.0"]["secondary_bus"], devs["17:01.0"]["subordinate_bus"]) == (0x19, 0x19)
    # the NVSwitch is class "Bridge" (0680) but routes no PCI buses
    assert devs["83:00.0"]["is_bridge"] is False and devs["83:00.0"]["kernel_driver"] == "nvidia-nvswitch"
    assert frag["gpus"] == ["19:00.0"] and frag["nics"] == ["1a:00.0"]
    assert frag["capabilities_denied"] is False


def test_hgx_h100_acs_flags(corpus: Path) -> None:
    frag = parse_lspci_vvv(read(corpus, HGX_VVV))
    devs = by_bdf(frag)
    pmc = {bdf for bdf, d in devs.items() if d["description"].startswith("PMC-Sierra")}
    assert pmc == {"82:00.0", "82:01.0"}
    assert set(frag["acs_enabled_bridges"]) == pmc
    ctl = devs["82:00.0"]["acs_ctl"]
    assert (ctl["ReqRedir"], ctl["CmpltRedir"], ctl["UpstreamFwd"], ctl["EgressCtrl"]) == (True, True, True, False)
    # PEX890xx downstream ports and the Intel root port: ACSCtl present, every flag '-'
    for bdf in ("15:01.0", "17:00.0", "17:01.0"):
        assert devs[bdf]["acs_enabled"] is False and not any(devs[bdf]["acs_ctl"].values())
    assert devs["16:00.0"]["acs_ctl"] is None and devs["16:00.0"]["acs_enabled"] is None  # no ACS capability printed


def test_acs_flag_maps_are_separate_per_device() -> None:
    # Identical ACSCtl lines are read once (cached): each device must still own its flag map.
    port = "{bdf} PCI bridge: PLX Technology, Inc. PEX 8747 (rev ca)\n\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+\n"
    frag = parse_lspci_vvv(port.format(bdf="01:00.0") + "\n" + port.format(bdf="02:00.0"))
    first, second = frag["devices"]
    assert first["acs_ctl"] == second["acs_ctl"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True}
    first["acs_ctl"]["SrcValid"] = False
    assert second["acs_ctl"]["SrcValid"] is True
    again = parse_lspci_vvv(port.format(bdf="01:00.0"))["devices"][0]
    assert again["acs_ctl"]["SrcValid"] is True and again["acs_enabled"] is True


def expected_on_path(frag: dict) -> set[str]:
    """ACS-enabled bridges whose bus range holds the bus of a GPU or NIC in the same domain (computed independently)."""
    devs = by_bdf(frag)
    targets = [split_bdf(bdf) for bdf in frag["gpus"] + frag["nics"]]
    return {
        bdf
        for bdf in frag["acs_enabled_bridges"]
        if any(
            dom == split_bdf(bdf)[0] and devs[bdf]["secondary_bus"] <= bus <= devs[bdf]["subordinate_bus"]
            for dom, bus in targets
        )
    }


def test_hgx_h100_upstream_paths(corpus: Path) -> None:
    frag = parse_lspci_vvv(read(corpus, HGX_VVV))
    devs = by_bdf(frag)
    assert devs["19:00.0"]["upstream"] == ["17:01.0", "16:00.0", "15:01.0"]
    assert devs["1a:00.0"]["upstream"] == ["16:00.0", "15:01.0"]
    assert devs["83:00.0"]["upstream"] == ["82:00.0"]
    # the PMC-Sierra ports sit above the NVSwitches only, not above the GPU or the NIC
    assert set(frag["gpu_nic_path_acs_enabled"]) == expected_on_path(frag) == set()


def test_acs_enabled_above_gpu_is_on_gpu_path(corpus: Path) -> None:
    text = read(corpus, HGX_VVV)
    # Turn ACS on at 17:01.0, the PEX890xx port right above the H100 at 19:00.0.
    block_start = text.index("17:01.0 PCI bridge")
    acs_at = text.index("ACSCtl:", block_start)
    line_end = text.index("\n", acs_at)
    acs_on = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    edited = text[:acs_at] + acs_on + text[line_end:]
    frag = parse_lspci_vvv(edited)
    assert set(frag["acs_enabled_bridges"]) == {"17:01.0", "82:00.0", "82:01.0"}
    assert frag["gpu_nic_path_acs_enabled"] == ["17:01.0"]
    assert set(frag["gpu_nic_path_acs_enabled"]) == expected_on_path(frag)


def test_plain_listing_domains_do_not_mix(corpus: Path) -> None:
    frag = parse_lspci_vvv(read(corpus, "lspci/lspci-gb200-compute-tray-cx7-bf3.txt"))
    assert frag["gpus"] == ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"]
    # ConnectX-7 PCIe bridges are bridges, not NICs; the IB and BlueField-3 Ethernet functions are NICs
    assert "0000:01:00.0" not in frag["nics"] and "0000:03:00.0" in frag["nics"] and "0006:03:00.1" in frag["nics"]
    assert frag["acs_enabled_bridges"] == [] and frag["gpu_nic_path_acs_enabled"] == []


def test_access_denied_is_reported() -> None:
    text = (
        "00:01.0 PCI bridge: Intel Corporation Device 352a (rev 04) (prog-if 00 [Normal decode])\r\n"
        "\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0\r\n"
        "\tCapabilities: <access denied>\r\n"
        "01:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\r\n"
        "\tCapabilities: <access denied>\r\n"
    )
    frag = parse_lspci_vvv(text)
    assert frag["capabilities_denied"] is True
    assert by_bdf(frag)["00:01.0"]["acs_enabled"] is None
    assert by_bdf(frag)["01:00.0"]["upstream"] == ["00:01.0"]


@pytest.mark.parametrize("text", ["", "pcilib: Cannot open /proc/bus/pci\n", "\tindented: only\n"])
def test_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_lspci_vvv(text)


# --- `lspci -vvv | grep ACSCtl` pasted into a ticket (issue 10.4) ----------------------------------------------------

VVV = "lspci-vvv-hgx-h100-excerpt-pex890xx-acs-off-pmc-sierra-acs-on-nvswitch-22a3.txt"


def _grep(text: str, keep=lambda line: True) -> str:
    return "".join(line + "\n" for line in text.splitlines() if "ACSCtl:" in line and keep(line))


def test_acsctl_lines_without_headers_are_read_with_a_note(corpus: Path) -> None:
    full = (corpus / "lspci" / VVV).read_text()
    whole = parse_lspci_vvv(full)
    # the grep of the real output: the two PMC-Sierra ports above the NVSwitches have ACS on
    part = parse_lspci_vvv(_grep(full))
    assert_valid(pcie.LSPCI_VVV_SCHEMA, part)
    assert part["acs_ctl_lines"] == whole["acs_ctl_lines"] == 5 and part["devices"] == []
    # ACS is on somewhere, but without the headers nobody can say it is off the GPU-NIC paths (it is, in the
    # full output): unknown, neither the full output's [] nor a failure
    assert whole["gpu_nic_path_acs_enabled"] == [] and part["gpu_nic_path_acs_enabled"] is None
    assert any("2 of them have ACS flags on" in n for n in part["notes"])
    off = parse_lspci_vvv(_grep(full, lambda line: "+" not in line))
    assert off["gpu_nic_path_acs_enabled"] == [] and off["acs_enabled_bridges"] == []  # all off proves none is on
