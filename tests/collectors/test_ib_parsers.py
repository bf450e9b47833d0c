"""InfiniBand / RoCE parsers (ibstat, ibstatus, ibv_devinfo, ibdev2netdev, sysfs counters, ofed_info, show_gids,
rdma link) against the real-output corpus."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fabricproof.collectors import ib
from fabricproof.collectors.base import Collector, ParseError

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

# Same location as the `corpus` fixture (tests/conftest.py); only used to list files at collection time.
_CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
COLLECTORS = {c.id: c for c in ib.COLLECTORS}
FAMILIES = ("ibstat", "ibv_devinfo", "ibdev2netdev", "rdma", "sysfs-infiniband")


def _collector_for(family: str, name: str) -> str | None:
    """Which collector reads a corpus file; None means nobody claimed it (the coverage test then fails)."""
    if family == "ibstat":
        return "ibstatus" if name.startswith("ibstatus") else "ibstat"
    if family == "rdma":
        return "show_gids" if name.startswith("show_gids") else "rdma_link" if name.startswith("rdma-link") else None
    return {"ibv_devinfo": "ibv_devinfo", "ibdev2netdev": "ibdev2netdev", "sysfs-infiniband": "ib_counters"}.get(family)


def _cases() -> list[tuple[str, str, str | None]]:
    cases = []
    for family in FAMILIES:
        folder = _CORPUS / family
        if folder.is_dir():
            cases += [(family, p.name, _collector_for(family, p.name)) for p in sorted(folder.iterdir())]
    return cases


def _read(corpus: Path, family: str, name: str) -> str:
    return (corpus / family / name).read_text(encoding="utf-8")


def _parse(corpus: Path, family: str, name: str, collector_id: str) -> dict[str, Any]:
    collector = COLLECTORS[collector_id]
    fragment = collector.parse(_read(corpus, family, name))
    assert_valid(collector.schema, fragment)
    return fragment


def _ports(fragment: dict[str, Any], ca: str) -> list[dict[str, Any]]:
    return [p for p in fragment["ports"] if p["ca"] == ca]


# --- every corpus file parses and matches its collector's schema ----------------------------------------------------


@pytest.mark.parametrize(("family", "name", "collector_id"), _cases(), ids=lambda v: str(v))
def test_every_corpus_file_parses_and_validates(corpus: Path, family: str, name: str, collector_id: str | None) -> None:
    assert collector_id is not None, f"no collector reads {family}/{name}"
    fragment = _parse(corpus, family, name, collector_id)
    assert fragment, "empty fragment"
    assert family in COLLECTORS[collector_id].corpus


def test_case_list_covers_every_family(corpus: Path) -> None:
    listed = {(f, n) for f, n, _ in _cases()}
    on_disk = {(f, p.name) for f in FAMILIES for p in (corpus / f).iterdir()}
    assert listed == on_disk and len(on_disk) >= 20


# --- declarations and schema conventions -----------------------------------------------------------------------------


@pytest.mark.parametrize("collector", ib.COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


def test_collector_table_matches_the_contract() -> None:
    assert_collector_table(
        ib.COLLECTORS,
        {
            "ibstat": (("ibstat",), "/ib/ibstat", True),
            "ibstatus": (("ibstatus",), "/ib/ibstat", False),
            "ibv_devinfo": (("ibv_devinfo", "-v"), "/ib/devinfo", True),
            "ibdev2netdev": (("ibdev2netdev",), "/ib/netdev", True),
            "ib_counters": (("sh", "-c", ib.IB_COUNTERS_SCRIPT), "/ib/counters", True),
            "ofed_info": (("ofed_info", "-s"), "/ofed", True),
            "show_gids": (("show_gids",), "/roce/gids", True),
            "rdma_link": (("rdma", "link", "show"), "/ib/rdma_link", False),
        },
    )
    assert 255 in COLLECTORS["ibstat"].ok_exit_codes and 0 in COLLECTORS["ibstat"].ok_exit_codes
    # alternatives that land on one pointer must agree on the fragment schema
    assert COLLECTORS["ibstatus"].schema is COLLECTORS["ibstat"].schema


def test_counters_script_reproduces_the_sysfs_corpus_from_a_host_root(corpus: Path, tmp_path: Path) -> None:
    """The fixed script, run by a real /bin/sh over a tree rebuilt from the gpud capture under
    $FABRICPROOF_HOST_ROOT, prints the capture's `path: value` lines back (the format the parser reads)."""
    import os
    import subprocess

    lines = (corpus / "sysfs-infiniband" / "gpud-h100-node-8x-cx7-ndr-plus-bond.txt").read_text().splitlines()
    for line in lines:
        path, _, value = line.partition(": ")
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value.replace("\\n", "\n") + "\n")
    argv = ib.COLLECTORS[[c.id for c in ib.COLLECTORS].index("ib_counters")].argv
    env = {**os.environ, "FABRICPROOF_HOST_ROOT": str(tmp_path), "LC_ALL": "C"}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30, check=True).stdout
    printed = out.splitlines()
    assert printed, "the script printed nothing"
    assert set(printed) <= set(lines), sorted(set(printed) - set(lines))[:5]
    fragment = ib.parse_ib_counters(out)
    assert fragment == ib.parse_ib_counters("\n".join(l for l in lines if l in set(printed)))
    assert fragment["totals"]["link_downed"] == 255


# --- ibstat ----------------------------------------------------------------------------------------------------------


def test_ibpanic_tail_keeps_the_eight_cas_and_reports_the_panic(corpus: Path) -> None:
    f = _parse(corpus, "ibstat", "a100-azure-cx6-mt4124-hdr200-8port-ibpanic-exit255.txt", "ibstat")
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
    f = _parse(corpus, "ibstat", name, "ibstat")
    found = {p["ca"]: p["phys_state"] for p in f["ports"] if p["state"] == "Down"}
    assert found == down
    assert all(p["rate"] == 40 for p in f["ports"] if p["state"] == "Down")
    assert f["ports_active"] == len(f["ports"]) - len(down) and f["errors"] == []


def test_h100_all_active_eight_cx7_ndr_plus_bluefield_bond(corpus: Path) -> None:
    f = _parse(corpus, "ibstat", "h100-cx7-mt4129-ndr400-ib-all-active.txt", "ibstat")
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
    f = _parse(corpus, "ibstat", "a100-mt4126-mixed-eth-ib-hdr200.txt", "ibstat")
    (eth,) = [p for p in f["ports"] if p["link_layer"] == "Ethernet"]
    assert eth["ca"] == "mlx5_0" and eth["sm_lid"] == 0 and eth["rate"] == 200
    assert all(p["sm_lid"] == 83 for p in f["ports"] if p["link_layer"] == "InfiniBand")


def test_tab_and_space_indentation_and_crlf_parse_identically(corpus: Path) -> None:
    spaces = _read(corpus, "ibstat", "h100-cx7-mt4129-ndr400-ib-all-active.txt")
    assert "\t" not in spaces  # the capture uses 8-space indentation
    tabs = re.sub(r"^( {8})+", lambda m: "\t" * (len(m.group(0)) // 8), spaces, flags=re.M)
    assert "\t" in tabs
    expected = ib.parse_ibstat(spaces)
    assert ib.parse_ibstat(tabs) == expected
    assert ib.parse_ibstat(spaces.replace("\n", "\r\n")) == expected


def test_ibstat_rejects_ibstatus_output_and_garbage(corpus: Path) -> None:
    with pytest.raises(ParseError, match="ibstatus"):
        ib.parse_ibstat(_read(corpus, "ibstat", "ibstatus-a100-azure-hdr200-8port.txt"))
    for text in ("", "   \n", "hello world\nthis is not ibstat\n", "bash: ibstat: command not found\n"):
        with pytest.raises(ParseError):
            ib.parse_ibstat(text)


def test_ibstat_panic_before_any_ca_is_reported_not_raised(corpus: Path) -> None:
    lines = _read(corpus, "ibstat", "a100-azure-cx6-mt4124-hdr200-8port-ibpanic-exit255.txt").splitlines()
    panic = next(line for line in reversed(lines) if line.strip())
    f = ib.parse_ibstat(panic + "\n")
    assert f["count"] == 0 and f["errors"] == [panic]


# --- ibstatus --------------------------------------------------------------------------------------------------------


def test_ibstatus_maps_sysfs_states_to_ibstat_names(corpus: Path) -> None:
    f = _parse(corpus, "ibstat", "ibstatus-a100-azure-hdr200-8port.txt", "ibstatus")
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
    status = _parse(corpus, "ibstat", "ibstatus-a100-azure-hdr200-8port.txt", "ibstatus")
    stat = _parse(corpus, "ibstat", "a100-azure-cx6-mt4124-hdr200-8port-ibpanic-exit255.txt", "ibstat")
    from_gid = {p["ca"]: p["port_guid"] for p in status["ports"] if p["port_guid"]}
    from_ibstat = {p["ca"]: p["port_guid"] for p in stat["ports"]}
    assert from_gid == from_ibstat  # GID index 0 = subnet prefix + port GUID; also base LIDs agree
    assert {p["ca"]: p["base_lid"] for p in status["ports"] if p["ca"] in from_ibstat} == {
        p["ca"]: p["base_lid"] for p in stat["ports"]
    }


def test_ibstatus_rejects_ibstat_output(corpus: Path) -> None:
    with pytest.raises(ParseError):
        ib.parse_ibstatus(_read(corpus, "ibstat", "h100-cx7-mt4129-ndr400-ib-all-active.txt"))


# --- ibv_devinfo -----------------------------------------------------------------------------------------------------


def test_devinfo_plain_eight_cx7_ib(corpus: Path) -> None:
    f = _parse(corpus, "ibv_devinfo", "ibv_devinfo-8x-cx7-dell-DEL0000000036-ib-deepep-issue.txt", "ibv_devinfo")
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
    f = _parse(corpus, "ibv_devinfo", "ibv_devinfo-vv-cx6-4123-hdr-2port-one-down-ucx-issue.txt", "ibv_devinfo")
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
    f = _parse(corpus, "ibv_devinfo", name, "ibv_devinfo")
    states = {p["device"]: (p["state"], p["active_mtu"], p["link_layer"]) for p in f["ports"]}
    assert states == {
        "rocep1s0f0": ("PORT_DOWN", 1024, "Ethernet"),
        "rocep1s0f1": ("PORT_ACTIVE", 4096, "Ethernet"),
        "roceP2p1s0f0": ("PORT_DOWN", 1024, "Ethernet"),
        "roceP2p1s0f1": ("PORT_ACTIVE", 4096, "Ethernet"),
    }


def test_devinfo_no_devices_and_garbage() -> None:
    f = ib.parse_ibv_devinfo("No IB devices found\n")
    assert f == {"devices": [], "ports": [], "errors": ["No IB devices found"]}
    for text in ("", "garbage\nmore garbage\n", "CA 'mlx5_0'\n\tCA type: MT4129\n"):
        with pytest.raises(ParseError):
            ib.parse_ibv_devinfo(text)


# --- ibdev2netdev ----------------------------------------------------------------------------------------------------


def test_ibdev2netdev_plain_and_verbose_agree_on_the_map(corpus: Path) -> None:
    plain = _parse(corpus, "ibdev2netdev", "ibdev2netdev-mixed-cx4lx-cx5-cx6-hdr-socket-direct.txt", "ibdev2netdev")
    verbose = _parse(corpus, "ibdev2netdev", "ibdev2netdev-v-mixed-cx4lx-cx5-cx6-hdr-socket-direct.txt", "ibdev2netdev")
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
    f = _parse(corpus, "ibdev2netdev", "ibdev2netdev-cx7-rocep-names-dual-pci-domain.txt", "ibdev2netdev")
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
            ib.parse_ibdev2netdev(text)


# --- sysfs counters --------------------------------------------------------------------------------------------------

GPUD_H100 = "gpud-h100-node-8x-cx7-ndr-plus-bond.txt"


def test_sysfs_h100_rates_and_summed_counters(corpus: Path) -> None:
    f = _parse(corpus, "sysfs-infiniband", GPUD_H100, "ib_counters")
    ndr = [p for p in f["ports"] if p["device"] != "mlx5_bond_0"]
    assert [p["device"] for p in ndr] == [f"mlx5_{i}" for i in (0, 1, 4, 5, 6, 7, 8, 9)]
    assert {(p["rate"], p["rate_gbps"], p["link_layer"], p["state"], p["phys_state"]) for p in ndr} == {
        ("400 Gb/sec (4X NDR)", 400, "InfiniBand", "4: ACTIVE", "5: LinkUp")
    }
    (bond,) = [p for p in f["ports"] if p["device"] == "mlx5_bond_0"]
    assert (bond["rate"], bond["rate_gbps"], bond["link_layer"], bond["state_name"]) == (
        "200 Gb/sec (2X NDR)",
        200,
        "Ethernet",
        "ACTIVE",
    )
    cx7 = [d for d in f["devices"] if d["name"] != "mlx5_bond_0"]
    assert {(d["hca_type"], d["fw_ver"], d["board_id"]) for d in cx7} == {("MT4129", "28.41.1000", "MT_0000000838")}
    # totals over the 9 ports: 9 x 15 buffer overruns, 255 link downs all on mlx5_1
    assert f["totals"]["excessive_buffer_overrun_errors"] == 135
    assert f["totals"]["link_downed"] == 255
    assert f["totals"]["port_rcv_errors"] == 126
    assert f["totals"]["symbol_error"] == 0
    assert f["hw_totals"]["roce_adp_retrans"] == 27
    assert next(p for p in f["ports"] if p["device"] == "mlx5_1")["counters"]["link_downed"] == 255


@pytest.mark.parametrize("name", sorted(p.name for p in (_CORPUS / "sysfs-infiniband").glob("*.txt")))
def test_sysfs_totals_are_the_per_port_sums(corpus: Path, name: str) -> None:
    f = _parse(corpus, "sysfs-infiniband", name, "ib_counters")
    names = {k for p in f["ports"] for k in p["counters"]}
    assert f["totals"] == {k: sum(p["counters"].get(k, 0) for p in f["ports"]) for k in sorted(names)}
    text = _read(corpus, "sysfs-infiniband", name)
    lines = [line for line in text.splitlines() if re.search(r"/(hw_)?counters/", line)]
    assert sum(len(p["counters"]) + len(p["hw_counters"]) for p in f["ports"]) == len(lines)


def test_sysfs_grep_h_and_relative_paths_read_the_same(corpus: Path) -> None:
    text = _read(corpus, "sysfs-infiniband", "procfs-fixture-mlx4_0-connectx3-qdr-2port.txt")
    expected = ib.parse_ib_counters(text)
    assert len(expected["ports"]) == 2 and expected["devices"][0]["hca_type"] == "MT4099"
    grep_h = re.sub(r"^([^:]+): ", r"\1:", text, flags=re.M)  # `grep -H . <files>` prints path:value
    assert grep_h != text and ib.parse_ib_counters(grep_h) == expected
    relative = text.replace("/sys/class/infiniband/", "")  # grep run inside /sys/class/infiniband
    assert ib.parse_ib_counters(relative) == expected


def test_sysfs_keeps_non_numeric_port_values_verbatim(corpus: Path) -> None:
    f = _parse(corpus, "sysfs-infiniband", "procfs-fixture-mlx5_0-mt4118-hw_counters.txt", "ib_counters")
    (port,) = f["ports"]
    # the procfs fixture's phys_state is hand-edited to "4: ACTIVE" (see PROVENANCE): kept as printed
    assert (port["phys_state"], port["phys_state_name"], port["rate_gbps"]) == ("4: ACTIVE", "ACTIVE", 25)
    assert f["devices"][0]["node_guid"] == "0a7f:bc12:45ef:d23b"
    assert port["hw_counters"]["req_cqe_error"] == 3481


def test_sysfs_garbage() -> None:
    for text in ("", "no paths here\n", "CA 'mlx5_0'\n"):
        with pytest.raises(ParseError):
            ib.parse_ib_counters(text)


# --- ofed_info -s ----------------------------------------------------------------------------------------------------

# Real outputs found through the code index (sources named in ib.py next to the pattern).
@pytest.mark.parametrize(
    ("line", "flavor", "release", "doca"),
    [
        ("MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "MLNX_OFED_LINUX", "23.10-1.1.9.0", False),
        ("OFED-internal-24.10-1.1.4.0.200:\n", "OFED-internal", "24.10-1.1.4.0.200", True),
        ("OFED-internal-25.10-1.7.1:\r\n", "OFED-internal", "25.10-1.7.1", True),
    ],
)
def test_ofed_info_versions(line: str, flavor: str, release: str, doca: bool) -> None:
    fragment = ib.parse_ofed_info(line)
    assert_valid(ib.OFED_SCHEMA, fragment)
    assert fragment == {"version": line.strip().rstrip(":"), "flavor": flavor, "release": release, "doca": doca}
    assert fragment["doca"] is doca


def test_ofed_info_garbage() -> None:
    for text in ("", "bash: ofed_info: command not found\n", "hello-world\n"):
        with pytest.raises(ParseError):
            ib.parse_ofed_info(text)


# --- show_gids / rdma link -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in (_CORPUS / "rdma").glob("show_gids*")))
def test_show_gids_tab_and_space_separated(corpus: Path, name: str) -> None:
    text = _read(corpus, "rdma", name)
    assert "\t" in text
    f = _parse(corpus, "rdma", name, "show_gids")
    assert f["count"] == f["n_gids_found"] == 4
    assert [(e["index"], e["version"]) for e in f["entries"]] == [(0, "v1"), (1, "v2"), (2, "v1"), (3, "v2")]
    assert [e["ipv4"] is not None for e in f["entries"]] == [False, False, True, True]
    assert f["rocev2_ipv4_indexes"] == [3]
    spaced = ib.parse_show_gids(re.sub(r"[ \t]+", " ", text))  # a paste that lost its TABs
    assert spaced == f


def test_show_gids_bond_values(corpus: Path) -> None:
    f = _parse(corpus, "rdma", "show_gids-mlx5_bond_0-roce-v1-v2.txt", "show_gids")
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
    f = _parse(corpus, "rdma", "rdma-link-show-cx5-roce-2port-daocloud.txt", "rdma_link")
    assert [(l["device"], l["port"], l["state"], l["physical_state"], l["netdev"]) for l in f["links"]] == [
        ("mlx5_0", 1, "ACTIVE", "LINK_UP", "enp4s0f0np0"),
        ("mlx5_1", 1, "ACTIVE", "LINK_UP", "enp4s0f1np1"),
    ]


def test_show_gids_without_roce_gids_is_an_empty_table(corpus: Path) -> None:
    header = "\n".join(_read(corpus, "rdma", "show_gids-mlx5_0-roce-rdma0-netdev.txt").splitlines()[:2])
    f = ib.parse_show_gids(header + "\nn_gids_found=0\n")
    assert_valid(ib.GIDS_SCHEMA, f)
    assert f == {"entries": [], "count": 0, "n_gids_found": 0, "rocev2_ipv4_indexes": []}


def test_show_gids_and_rdma_link_garbage(corpus: Path) -> None:
    for text in ("", "DEV\tPORT\tINDEX\tGID\n---\t----\n", "n_gids_found=0\n", "hello world\n"):
        with pytest.raises(ParseError):
            ib.parse_show_gids(text)
    with pytest.raises(ParseError):
        ib.parse_show_gids(_read(corpus, "rdma", "rdma-link-show-cx5-roce-2port-daocloud.txt"))
    for text in ("", "mlx5_0 port 1 ==> ib0 (Up)\n"):
        with pytest.raises(ParseError):
            ib.parse_rdma_link(text)
