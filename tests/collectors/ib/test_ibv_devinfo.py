"""ibv_devinfo parser (plain, -v, -vv) against the real-output corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.ib.ibv_devinfo import parse_ibv_devinfo

from .iblib import parse


# --- ibv_devinfo -----------------------------------------------------------------------------------------------------


def test_devinfo_plain_eight_cx7_ib(corpus: Path) -> None:
    f = parse(corpus, "ibv_devinfo", "ibv_devinfo-8x-cx7-dell-DEL0000000036-ib-deepep-issue.txt", "ibv_devinfo")
    assert [d["name"] for d in f["devices"]] == [f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11)]
    assert {(d["fw_ver"], d["board_id"], d["vendor_part_id"], d["transport"]) for d in f["devices"]} == {
        ("28.41.1000", "DEL0000000036", 4129, "InfiniBand")
    }
    assert f["devices"][0]["node_guid"] == "58a2:e103:001a:677e"
    assert {(p["state"], p["active_mtu"], p["max_mtu"], p["sm_lid"], p["link_layer"]) for p in f["ports"]} == {
        ("PORT_ACTIVE", 4096, 4096, 5790, "InfiniBand")
    }
    assert f["ports"][-1]["device"] == "mlx5_11" and f["ports"][-1]["port_lid"] == 3735
    assert f["errors"] == []


def test_devinfo_vv_reads_ports_past_capability_lists(corpus: Path) -> None:
    f = parse(corpus, "ibv_devinfo", "ibv_devinfo-vv-cx6-4123-hdr-2port-one-down-ucx-issue.txt", "ibv_devinfo")
    assert [(d["name"], d["board_id"], d["vendor_part_id"]) for d in f["devices"]] == [
        ("mlx5_0", "MT_0000000594", 4123),
        ("mlx5_1", "MT_0000000594", 4123),
    ]
    up, down = f["ports"]
    assert (up["state"], up["phys_state"], up["active_width"], up["active_speed"], up["port_lid"]) == (
        "PORT_ACTIVE",
        "LINK_UP",
        "4X",
        "50.0 Gbps",
        4,
    )
    assert up["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:88e9:a4ff:ff25:a462", "type": None}]
    assert (down["state"], down["phys_state"], down["active_speed"], down["port_lid"]) == (
        "PORT_DOWN",
        "DISABLED",
        None,
        65535,
    )


def test_devinfo_roce_functions(corpus: Path) -> None:
    name = "ibv_devinfo-cx7-board-NVD0000000087-roce-4port-dual-pci-domain.txt"
    f = parse(corpus, "ibv_devinfo", name, "ibv_devinfo")
    states = {p["device"]: (p["state"], p["active_mtu"], p["link_layer"]) for p in f["ports"]}
    assert states == {
        "rocep1s0f0": ("PORT_DOWN", 1024, "Ethernet"),
        "rocep1s0f1": ("PORT_ACTIVE", 4096, "Ethernet"),
        "roceP2p1s0f0": ("PORT_DOWN", 1024, "Ethernet"),
        "roceP2p1s0f1": ("PORT_ACTIVE", 4096, "Ethernet"),
    }


def test_devinfo_no_devices_and_garbage() -> None:
    f = parse_ibv_devinfo("No IB devices found\n")
    assert f == {"devices": [], "ports": [], "errors": ["No IB devices found"]}
    for text in ("", "garbage\nmore garbage\n", "CA 'mlx5_0'\n\tCA type: MT4129\n"):
        with pytest.raises(ParseError):
            parse_ibv_devinfo(text)
