"""show_gids and rdma link show parsers against the real-output corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.ib.rdma_link import parse_rdma_link
from fabricproof.collectors.ib.show_gids import GIDS_SCHEMA, parse_show_gids

from ..contract import assert_valid
from .iblib import CORPUS, parse, read


# --- show_gids / rdma link -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in (CORPUS / "rdma").glob("show_gids*")))
def test_show_gids_tab_and_space_separated(corpus: Path, name: str) -> None:
    text = read(corpus, "rdma", name)
    assert "\t" in text
    f = parse(corpus, "rdma", name, "show_gids")
    assert f["count"] == f["n_gids_found"] == 4
    assert [(e["index"], e["version"]) for e in f["entries"]] == [(0, "v1"), (1, "v2"), (2, "v1"), (3, "v2")]
    assert [e["ipv4"] is not None for e in f["entries"]] == [False, False, True, True]
    assert f["rocev2_ipv4_indexes"] == [3]
    spaced = parse_show_gids(re.sub(r"[ \t]+", " ", text))  # a paste that lost its TABs
    assert spaced == f


def test_show_gids_bond_values(corpus: Path) -> None:
    f = parse(corpus, "rdma", "show_gids-mlx5_bond_0-roce-v1-v2.txt", "show_gids")
    assert f["entries"][3] == {
        "device": "mlx5_bond_0",
        "port": 1,
        "index": 3,
        "gid": "0000:0000:0000:0000:0000:ffff:0a60:531a",
        "ipv4": "10.96.83.26",
        "version": "v2",
        "netdev": "bond0",
    }


def test_rdma_link_show(corpus: Path) -> None:
    f = parse(corpus, "rdma", "rdma-link-show-cx5-roce-2port-daocloud.txt", "rdma_link")
    assert [(l["device"], l["port"], l["state"], l["physical_state"], l["netdev"]) for l in f["links"]] == [
        ("mlx5_0", 1, "ACTIVE", "LINK_UP", "enp4s0f0np0"),
        ("mlx5_1", 1, "ACTIVE", "LINK_UP", "enp4s0f1np1"),
    ]


def test_show_gids_without_roce_gids_is_an_empty_table(corpus: Path) -> None:
    header = "\n".join(read(corpus, "rdma", "show_gids-mlx5_0-roce-rdma0-netdev.txt").splitlines()[:2])
    f = parse_show_gids(header + "\nn_gids_found=0\n")
    assert_valid(GIDS_SCHEMA, f)
    assert f == {"entries": [], "count": 0, "n_gids_found": 0, "rocev2_ipv4_indexes": []}


def test_show_gids_and_rdma_link_garbage(corpus: Path) -> None:
    for text in ("", "DEV\tPORT\tINDEX\tGID\n---\t----\n", "n_gids_found=0\n", "hello world\n"):
        with pytest.raises(ParseError):
            parse_show_gids(text)
    with pytest.raises(ParseError):
        parse_show_gids(read(corpus, "rdma", "rdma-link-show-cx5-roce-2port-daocloud.txt"))
    for text in ("", "mlx5_0 port 1 ==> ib0 (Up)\n"):
        with pytest.raises(ParseError):
            parse_rdma_link(text)
