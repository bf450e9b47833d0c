"""ibdev2netdev parser (plain and -v) against the real-output corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.ib.ibdev2netdev import parse_ibdev2netdev

from .iblib import parse


# --- ibdev2netdev ----------------------------------------------------------------------------------------------------


def test_ibdev2netdev_plain_and_verbose_agree_on_the_map(corpus: Path) -> None:
    plain = parse(corpus, "ibdev2netdev", "ibdev2netdev-mixed-cx4lx-cx5-cx6-hdr-socket-direct.txt", "ibdev2netdev")
    verbose = parse(corpus, "ibdev2netdev", "ibdev2netdev-v-mixed-cx4lx-cx5-cx6-hdr-socket-direct.txt", "ibdev2netdev")
    assert plain["map"] == verbose["map"] and plain["map"]["mlx5_5/1"] == "ib0" and len(plain["map"]) == 8
    assert [e["state"] for e in plain["entries"]] == [e["state"] for e in verbose["entries"]]
    sd = next(e for e in verbose["entries"] if e["device"] == "mlx5_5")
    assert (sd["pci"], sd["hca_type"], sd["part"], sd["fw"], sd["port_state"], sd["state"]) == (
        "0000:b1:00.0",
        "MT4123",
        "MCX654105A-HCAT",
        "20.30.1004",
        "ACTIVE",
        "Up",
    )
    assert sd["description"].startswith("ConnectX-6 VPI adapter card, HDR IB (200Gb/s)")
    assert sd["description"].endswith("Socket Direct")  # the padding before "fw" is not part of it
    vf = next(e for e in verbose["entries"] if e["device"] == "mlx5_6")
    assert (vf["part"], vf["description"], vf["port_state"]) == (None, None, "DOWN")  # "(MT4120 - NA)", "(DOWN  )"


def test_ibdev2netdev_roce_names(corpus: Path) -> None:
    f = parse(corpus, "ibdev2netdev", "ibdev2netdev-cx7-rocep-names-dual-pci-domain.txt", "ibdev2netdev")
    assert f["map"] == {
        "rocep1s0f0/1": "enp1s0f0np0",
        "rocep1s0f1/1": "enp1s0f1np1",
        "roceP2p1s0f0/1": "enP2p1s0f0np0",
        "roceP2p1s0f1/1": "enP2p1s0f1np1",
    }
    assert [e["state"] for e in f["entries"]] == ["Down", "Up", "Down", "Up"]


def test_ibdev2netdev_garbage() -> None:
    for text in ("", "mlx5_0 port 1 <== nothing\n", "hca_id:\tmlx5_0\n"):
        with pytest.raises(ParseError):
            parse_ibdev2netdev(text)
