"""ibstat and ibstatus parsers (one /ib/ibstat fragment) against the real-output corpus."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.ib.ibstat import parse_ibstat
from fabricproof.collectors.ib.ibstatus import parse_ibstatus

from .iblib import parse, read


def _ports(fragment: dict[str, Any], ca: str) -> list[dict[str, Any]]:
    return [p for p in fragment["ports"] if p["ca"] == ca]


# --- ibstat ----------------------------------------------------------------------------------------------------------


def test_ibpanic_tail_keeps_the_eight_cas_and_reports_the_panic(corpus: Path) -> None:
    f = parse(corpus, "ibstat", "a100-azure-cx6-mt4124-hdr200-8port-ibpanic-exit255.txt", "ibstat")
    assert f["count"] == 8 and [h["name"] for h in f["hcas"]] == [f"mlx5_{i}" for i in range(8)]
    assert len(f["errors"]) == 1
    assert f["errors"][0].startswith("ibpanic:") and "'mlx5_8' failed" in f["errors"][0]
    assert {(h["ca_type"], h["fw_version"], h["ports_count"]) for h in f["hcas"]} == {("MT4124", "20.41.1000", 1)}
    assert len(f["ports"]) == 8 and f["ports_active"] == 8
    assert {(p["state"], p["phys_state"], p["rate"], p["link_layer"]) for p in f["ports"]} == {
        ("Active", "LinkUp", 200, "InfiniBand")
    }
    first = f["ports"][0]
    assert first == {
        "ca": "mlx5_0",
        "ca_type": "MT4124",
        "port": 1,
        "state": "Active",
        "phys_state": "LinkUp",
        "rate": 200,
        "base_lid": 13247,
        "sm_lid": 1,
        "lmc": 0,
        "capability_mask": "0xa651ec48",
        "port_guid": "0x00155dfffd3411eb",
        "link_layer": "InfiniBand",
    }
    assert f["hcas"][0]["node_guid"] == "0x00155dfffe3411eb"
    assert f["hcas"][0]["system_image_guid"] == "0xb83fd203006e2704"


@pytest.mark.parametrize(
    ("name", "down"),
    [
        ("h100-cx7-roce-eth-some-ports-down.txt", {"mlx5_5": "Disabled", "mlx5_11": "Polling"}),
        ("cx7-mixed-ib-eth-some-ports-down.txt", {"mlx5_2": "Disabled", "mlx5_7": "Disabled", "mlx5_8": "Disabled"}),
    ],
)
def test_some_ports_down_show_state_down_with_rate_40(corpus: Path, name: str, down: dict[str, str]) -> None:
    f = parse(corpus, "ibstat", name, "ibstat")
    found = {p["ca"]: p["phys_state"] for p in f["ports"] if p["state"] == "Down"}
    assert found == down
    assert all(p["rate"] == 40 for p in f["ports"] if p["state"] == "Down")
    assert f["ports_active"] == len(f["ports"]) - len(down) and f["errors"] == []


def test_h100_all_active_eight_cx7_ndr_plus_bluefield_bond(corpus: Path) -> None:
    f = parse(corpus, "ibstat", "h100-cx7-mt4129-ndr400-ib-all-active.txt", "ibstat")
    cx7 = [h for h in f["hcas"] if h["name"] != "mlx5_bond_0"]
    assert len(cx7) == 8 and {(h["ca_type"], h["fw_version"]) for h in cx7} == {("MT4129", "28.41.1000")}
    cx7_ports = [p for p in f["ports"] if p["ca"] != "mlx5_bond_0"]
    assert len(cx7_ports) == 8
    assert {(p["rate"], p["link_layer"], p["state"], p["sm_lid"]) for p in cx7_ports} == {
        (400, "InfiniBand", "Active", 1)
    }
    (bond,) = _ports(f, "mlx5_bond_0")
    assert (bond["ca_type"], bond["link_layer"], bond["rate"], bond["base_lid"]) == ("MT41692", "Ethernet", 200, 0)
    assert next(h for h in f["hcas"] if h["name"] == "mlx5_bond_0")["fw_version"] == "32.38.3056"
    assert f["count"] == 9 and f["ports_active"] == 9 and f["errors"] == []


def test_mixed_ethernet_and_infiniband_link_layers(corpus: Path) -> None:
    f = parse(corpus, "ibstat", "a100-mt4126-mixed-eth-ib-hdr200.txt", "ibstat")
    (eth,) = [p for p in f["ports"] if p["link_layer"] == "Ethernet"]
    assert eth["ca"] == "mlx5_0" and eth["sm_lid"] == 0 and eth["rate"] == 200
    assert all(p["sm_lid"] == 83 for p in f["ports"] if p["link_layer"] == "InfiniBand")


def test_tab_and_space_indentation_and_crlf_parse_identically(corpus: Path) -> None:
    spaces = read(corpus, "ibstat", "h100-cx7-mt4129-ndr400-ib-all-active.txt")
    assert "\t" not in spaces  # the capture uses 8-space indentation
    tabs = re.sub(r"^( {8})+", lambda m: "\t" * (len(m.group(0)) // 8), spaces, flags=re.M)
    assert "\t" in tabs
    expected = parse_ibstat(spaces)
    assert parse_ibstat(tabs) == expected
    assert parse_ibstat(spaces.replace("\n", "\r\n")) == expected


def test_ibstat_rejects_ibstatus_output_and_garbage(corpus: Path) -> None:
    with pytest.raises(ParseError, match="ibstatus"):
        parse_ibstat(read(corpus, "ibstat", "ibstatus-a100-azure-hdr200-8port.txt"))
    for text in ("", "   \n", "hello world\nthis is not ibstat\n", "bash: ibstat: command not found\n"):
        with pytest.raises(ParseError):
            parse_ibstat(text)


def test_ibstat_panic_before_any_ca_is_reported_not_raised(corpus: Path) -> None:
    lines = read(corpus, "ibstat", "a100-azure-cx6-mt4124-hdr200-8port-ibpanic-exit255.txt").splitlines()
    panic = next(line for line in reversed(lines) if line.strip())
    f = parse_ibstat(panic + "\n")
    assert f["count"] == 0 and f["errors"] == [panic]


# --- ibstatus --------------------------------------------------------------------------------------------------------


def test_ibstatus_maps_sysfs_states_to_ibstat_names(corpus: Path) -> None:
    f = parse(corpus, "ibstat", "ibstatus-a100-azure-hdr200-8port.txt", "ibstatus")
    assert f["count"] == 9 and len(f["ports"]) == 9
    ib_ports = [p for p in f["ports"] if p["link_layer"] == "InfiniBand"]
    assert len(ib_ports) == 8
    assert {(p["state"], p["phys_state"], p["rate"], p["sm_lid"]) for p in ib_ports} == {("Active", "LinkUp", 200, 1)}
    mlx5_0 = _ports(f, "mlx5_0")[0]
    assert mlx5_0["base_lid"] == 0x33BF == 13247
    (eth,) = _ports(f, "mlx5_8")
    assert (eth["link_layer"], eth["rate"], eth["default_gid"], eth["port_guid"]) == ("Ethernet", 40, None, None)
    assert all(h["ca_type"] is None and h["fw_version"] is None for h in f["hcas"])


def test_ibstatus_port_guid_matches_ibstat_of_the_same_host_class(corpus: Path) -> None:
    status = parse(corpus, "ibstat", "ibstatus-a100-azure-hdr200-8port.txt", "ibstatus")
    stat = parse(corpus, "ibstat", "a100-azure-cx6-mt4124-hdr200-8port-ibpanic-exit255.txt", "ibstat")
    from_gid = {p["ca"]: p["port_guid"] for p in status["ports"] if p["port_guid"]}
    from_ibstat = {p["ca"]: p["port_guid"] for p in stat["ports"]}
    assert from_gid == from_ibstat  # GID index 0 = subnet prefix + port GUID; also base LIDs agree
    assert {p["ca"]: p["base_lid"] for p in status["ports"] if p["ca"] in from_ibstat} == {
        p["ca"]: p["base_lid"] for p in stat["ports"]
    }


def test_ibstatus_rejects_ibstat_output(corpus: Path) -> None:
    with pytest.raises(ParseError):
        parse_ibstatus(read(corpus, "ibstat", "h100-cx7-mt4129-ndr400-ib-all-active.txt"))
