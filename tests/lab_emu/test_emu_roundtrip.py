"""Round trip per profile: every collector parses the lab's output into facts equal to the node model.

The pure part renders outputs in-process; the tool part runs every collector argv through the lab's tool
scripts (as an SSH session would) and checks the same facts come back.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from fabricproof.collectors import COLLECTORS
from fabricproof_lab.emu import model, render_links
from fabricproof_lab.emu.faults import view as fault_view
from fabricproof_lab.emu.profiles import PROFILES

from .lablib import pure_outputs

PLATFORM = {"dgx-a100": "a100", "dgx-h100": "h100", "hgx-h200": "h200", "gb200-nvl72": "gb200"}
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def healthy(profile: str) -> dict[str, Any]:
    rack = 2 if profile == "gb200-nvl72" else None
    node = model.new_node(profile, 7, rack, "n-0007", "127.10.0.8")
    node["imex_peers"] = ["127.10.0.8", "127.10.0.9", "127.10.0.10"] if rack else []
    return fault_view(node)


def facts(view: dict[str, Any]) -> dict[str, Any]:
    return {cid: COLLECTORS[cid].parse(t) for cid, t in pure_outputs(view).items()}


def printed_fabric(view: dict[str, Any], gpu: dict[str, Any]) -> dict[str, Any]:
    """What nvidia-smi of the node's branch prints of the fabric block (535: no CliqueId; <580: no Summary)."""
    branch = int(view["driver"]["loaded"].split(".")[0])
    fab = gpu["fabric"]
    health = fab["health"] or {}
    return {
        "state": fab["state"], "status": fab["status"],
        "clique_id": fab["clique_id"] if branch >= 550 else None,
        "cluster_uuid": fab["cluster_uuid"] if branch >= 550 else None,
        "summary": health.get("summary") if branch >= 580 else None,
        "bandwidth": health.get("bandwidth") if branch >= 570 else None,
    }


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_gpu_facts_equal_the_model(profile: str) -> None:
    v = healthy(profile)
    f = facts(v)
    p = PROFILES[profile]
    for cid in ("nvidia_smi_q", "nvidia_smi_q_xml", "nvidia_smi_query_gpu"):
        gpu_facts = f[cid]
        assert gpu_facts["count"] == p["gpu"]["count"] == len(v["gpus"])
        assert gpu_facts["driver_version"] == p["driver"]["version"]
        if cid != "nvidia_smi_query_gpu":
            assert gpu_facts["cuda_version"] == p["cuda_version"]
        for got, gpu in zip(gpu_facts["gpus"], v["gpus"], strict=True):
            want = {"index": gpu["index"], "name": p["gpu"]["model"], "uuid": gpu["uuid"], "bus_id": gpu["bus_id"],
                    "vbios": gpu["vbios"], "persistence_mode": "Enabled", "ecc_mode": "Enabled",
                    "power_limit_w": p["gpu"]["power_limit_w"], "throttle_reasons": ["gpu_idle"],
                    "pcie_gen": p["gpu"]["pcie_gen"], "pcie_width": p["gpu"]["pcie_width"]}
            assert {k: got[k] for k in want} == want, cid
            fab = printed_fabric(v, gpu)
            assert (got["fabric"]["state"], got["fabric"]["status"]) == (fab["state"], fab["status"]), cid
            if cid != "nvidia_smi_query_gpu":
                assert got["remapped_rows"]["pending"] is False and got["remapped_rows"]["failure"] is False
                assert got["fabric"]["clique_id"] == fab["clique_id"], cid
                assert got["fabric"]["cluster_uuid"] == fab["cluster_uuid"], cid
                assert got["fabric"]["health"]["summary"] == fab["summary"], cid
                assert got["fabric"]["health"]["bandwidth"] == fab["bandwidth"], cid
    assert f["driver_version"]["version"] == p["driver"]["version"]
    assert f["driver_version"]["kernel_module"] == p["driver"]["kernel_module"]
    if profile == "gb200-nvl72":
        gpu = f["nvidia_smi_q"]["gpus"][0]["fabric"]
        assert gpu["clique_id"] != 0 and gpu["cluster_uuid"] != ZERO_UUID
        assert (gpu["health"]["summary"], gpu["health"]["bandwidth"]) == ("Healthy", "Full")


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_nvlink_and_topology_facts_equal_the_model(profile: str) -> None:
    v = healthy(profile)
    f = facts(v)
    nv = PROFILES[profile]["nvlink"]
    st = f["nvlink_status"]
    assert st["supported"] is True and st["links_per_gpu_min"] == nv["links_per_gpu"]
    assert st["links_inactive_total"] == 0 and st["gbps_min"] == st["gbps_max"] == nv["gbps"]
    want_links = [{"gpu": g["index"], "link": n, "active": True, "gbps": nv["gbps"]}
                  for g in v["gpus"] for n in range(nv["links_per_gpu"])]
    assert [{k: link[k] for k in ("gpu", "link", "active", "gbps")} for link in st["links"]] == want_links
    assert f["nvlink_errors"]["totals"] == {"replay": 0, "recovery": 0, "crc": 0}
    assert len(f["nvlink_errors"]["links"]) == len(want_links)
    nvl5 = [link["nvlink5"] for link in f["nvlink_errors"]["links"]]
    if PROFILES[profile]["gpu"]["architecture"] == "Blackwell":  # NVLink5 counters, no Replay/Recovery/CRC
        assert all(n["link_recovery_failed"] == n["effective_errors"] == n["rx_errors"] == 0 for n in nvl5)
        assert {n["effective_ber"] for n in nvl5} == {1.5e-254}  # NVML's "15e-255" floor: no error
        assert all(n["fec_errors"]["0"] > 10**10 and set(n["fec_errors"]) == {str(b) for b in range(16)} for n in nvl5)
        assert all(link["replay"] is None for link in f["nvlink_errors"]["links"])
    else:
        assert set(nvl5) == {None}
    assert f["nvlink_caps"]["p2p_all"] is True and len(f["nvlink_caps"]["links"]) == len(want_links)
    topo = f["topo"]
    assert topo["gpus"] == [f"GPU{g['index']}" for g in v["gpus"]]
    assert topo["nic_names"] == {f"NIC{i}": h["name"] for i, h in enumerate(v["hcas"])}
    assert {pair["link"] for pair in topo["gpu_pairs"]} == {nv["topo"]}
    assert topo["nvlink_bonds_min"] == nv["links_per_gpu"]
    nearest = {(n["gpu"], n["nic_name"], n["link"]) for n in topo["gpu_nearest_nic"]}
    if profile == "gb200-nvl72":
        assert {link for _g, _n, link in nearest} == {"SYS"}  # Grace: GPUs are their own NUMA nodes
    else:
        assert nearest == {(f"GPU{i}", f"mlx5_{i}", "PIX") for i in range(len(v["gpus"]))}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_nvlink_throughput_facts_equal_the_model(profile: str) -> None:
    v = healthy(profile)
    v["gpus"][1]["nvlinks"][2].update(active=False, gbps=None)  # an inactive link carries no counters
    gt = facts(v)["nvlink_throughput"]
    assert gt["supported"] is True and gt["counter"] == "data" and gt["elided"] is False and gt["notes"] == []
    assert [(g["index"], g["uuid"]) for g in gt["gpus"]] == [(g["index"], g["uuid"]) for g in v["gpus"]]
    want = [{"gpu": g["index"], "link": n, "tx_kib": render_links.data_kib(g, n, "Tx"),
             "rx_kib": render_links.data_kib(g, n, "Rx")}
            for g in v["gpus"] for n, link in enumerate(g["nvlinks"]) if link["active"]]
    assert gt["links"] == want
    # idle counters, a few GB each way, as the corpus H800 sample shows
    assert all(5_000_000 < link[k] < 7_000_000 for link in gt["links"] for k in ("tx_kib", "rx_kib"))


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_fabric_manager_imex_and_nvswitch_facts_equal_the_model(profile: str) -> None:
    v = healthy(profile)
    f = facts(v)
    p = PROFILES[profile]
    if p["fm"]["present"]:
        assert f["fm_version"] == {"version": p["fm"]["version"], "branch": None, "changelist": None}
        svc = f["fm_service"]
        assert (svc["load_state"], svc["active_state"], svc["sub_state"], svc["unit_file_state"], svc["restarts"],
                svc["active"]) == ("loaded", "active", "running", "enabled", 0, True)
        cfg_text = pure_outputs(v)["fm_config"]
        assert f["fm_config"]["settings"] == p["fm"]["config"]
        assert f["fm_config"]["sha256"] == hashlib.sha256(cfg_text.encode()).hexdigest()
        for cid in ("fm_log", "fm_journal"):
            assert f[cid]["version_mismatch"] is None and f[cid]["nvswitch_fatal_count"] == 0
            assert f[cid]["startups"] == 1
    else:
        assert f["fm_service"]["load_state"] == "not-found" and f["fm_service"]["active"] is False
        assert f["imex_service"]["active"] is True
        nodes = f["imex_nodes"]
        assert [n["address"] for n in nodes["nodes"]] == v["imex_peers"]
        assert nodes["all_ready"] is True and nodes["ready"] == nodes["total"] == 3
        assert f["imex_channels"]["channel0"] is True and f["imex_channels"]["directory"] is True
    pci = f["nvswitch_pci"]
    assert pci["count"] == p["nvswitch"]["count"]
    assert {d["device_id"] for d in pci["devices"]} == ({p["nvswitch"]["pci_device_id"]} if pci["count"] else set())
    fw = f["nvswitch_firmware"]
    assert fw["nvswitch_versions"] == [p["nvswitch"]["firmware"]] * p["nvswitch"]["count"]
    assert fw["gpu_versions"] == [p["gpu"]["vbios"]] * p["gpu"]["count"]


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_host_facts_equal_the_model(profile: str) -> None:
    v = healthy(profile)
    f = facts(v)
    assert f["lsmod"]["loaded"] == v["modules"]
    assert f["lsmod"]["nvidia_peermem"] is True and f["lsmod"]["nv_peer_mem"] is False
    assert f["cmdline"]["raw"] == v["cmdline"] and f["cmdline"]["iommu"] == "pt"
    log = f["kernel_log"]
    assert (log["xid_codes"], log["sxid_fatal_count"], log["sxid_nonfatal_count"], log["ib_lost_carrier"]) == ([], 0, 0, 0)
    pcie = f["lspci_vvv"]
    strip = (lambda b: b[5:]) if profile != "gb200-nvl72" else (lambda b: b)  # lspci hides domain 0000 on x86
    assert sorted(pcie["gpus"]) == sorted(strip(f"{g['domain'].lower()}:{g['bus']}:00.0") for g in v["gpus"])
    assert sorted(pcie["nics"]) == sorted(strip(h["bdf"]) for h in v["hcas"])
    assert pcie["gpu_nic_path_acs_enabled"] == []
    on = pcie["acs_enabled_bridges"]
    # Real HGX Hopper boards: ACS on above the NVSwitches only (corpus lspci -vvv PMC-Sierra ports).
    assert len(on) == (4 if profile in ("dgx-h100", "hgx-h200") else 6 if profile == "dgx-a100" else 0)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_infiniband_facts_equal_the_model(profile: str) -> None:
    v = healthy(profile)
    f = facts(v)
    ib = f["ibstat"]
    assert ib["count"] == len(v["hcas"]) and ib["errors"] == []
    for got, hca in zip(ib["hcas"], v["hcas"], strict=True):
        assert (got["name"], got["ca_type"], got["fw_version"], got["node_guid"]) == (
            hca["name"], hca["ca_type"], hca["fw"], "0x" + hca["node_guid"])
    for got, hca in zip(ib["ports"], v["hcas"], strict=True):
        port = hca["ports"][0]
        assert {k: got[k] for k in ("ca", "port", "state", "phys_state", "rate", "base_lid", "sm_lid", "link_layer")} == {
            "ca": hca["name"], "port": 1, "state": "Active", "phys_state": "LinkUp", "rate": port["rate"],
            "base_lid": port["base_lid"], "sm_lid": port["sm_lid"], "link_layer": port["link_layer"]}
    dev = f["ibv_devinfo"]
    assert [(d["name"], d["fw_ver"], d["board_id"]) for d in dev["devices"]] == [
        (h["name"], h["fw"], h["psid"]) for h in v["hcas"]]
    assert {(p["state"], p["active_mtu"]) for p in dev["ports"]} == {("PORT_ACTIVE", 4096)}
    assert f["ibdev2netdev"]["map"] == {f"{h['name']}/1": h["ports"][0]["netdev"] for h in v["hcas"]}
    counters = f["ib_counters"]
    assert len(counters["ports"]) == len(v["hcas"]) and set(counters["totals"].values()) == {0}
    assert {tuple(p["pkeys"] or ()) for p in counters["ports"] if p["link_layer"] == "InfiniBand"} == {("0xffff", "0x8001")}
    sm = f["sminfo"]
    assert (sm["master"], sm["lid"]) == (True, v["hcas"][0]["ports"][0]["sm_lid"])
    links = f["mlxlink"]["devices"]
    assert [d["device"] for d in links] == sorted(h["name"] for h in v["hcas"])
    assert {(d["state"], d["recommendation"], d["effective_ber"]) for d in links} == {
        ("Active", "No issue was observed", 15e-255)}
    assert {d["firmware"] for d in links} == {h["fw"] for h in v["hcas"]}
    (pq,) = f["perfquery"]["ports"]
    assert pq["lid"] == v["hcas"][0]["ports"][0]["base_lid"] and pq["counters"]["SymbolErrorCounter"] == 0
    assert f["ofed_info"]["version"] == PROFILES[profile]["ofed"]
    fw = f["mlxfwmanager"]["devices"]
    assert [(d["psid"], d["pci_device"], d["fw_current"], d["fw_running"], d["base_guid"]) for d in fw] == [
        (h["psid"], h["bdf"], h["fw"], h["fw"], h["node_guid"]) for h in v["hcas"]]
    assert (f["flint"]["fw_version"], f["flint"]["psid"]) == (v["hcas"][0]["fw"], v["hcas"][0]["psid"])
    gids = f["show_gids"]["entries"]
    eth = [h for h in v["hcas"] if h["ports"][0]["link_layer"] == "Ethernet"]
    assert {(g["device"], g["index"], g["version"]) for g in gids if g["ipv4"]} == {
        (h["name"], i, ver) for h in eth for i, ver in ((2, "v1"), (3, "v2"))}


def test_the_lab_answers_every_collector() -> None:
    """Each collector has a lab answer on some profile (the argv test below skips collectors without one). Probes
    (loads_fabric) are answered by tools that compute their figures per run: test_emu_probes.py proves them."""
    answered = set().union(*(pure_outputs(healthy(profile)) for profile in PROFILES))
    assert sorted({c for c, col in COLLECTORS.items() if not col.loads_fabric and not col.fabric_scope} - answered) == []


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_collector_argv_is_answered_by_the_lab_tools(profile: str, make_node) -> None:
    """Through the tool scripts: each applicable collector's command succeeds and parses to the pure facts."""
    node = make_node(profile)
    v = node.view()
    expected = facts(v)
    for cid, collector in sorted(COLLECTORS.items()):
        if PLATFORM[profile] not in collector.platforms or cid not in expected:
            continue
        r = node.run(*collector.argv)
        assert r.returncode in collector.ok_exit_codes, (cid, r.returncode, r.stderr)
        got = collector.parse(r.stdout)
        if cid in ("flint",):  # the script picks the first adapter lspci lists
            assert got["fw_version"] == expected[cid]["fw_version"]
            continue
        assert got == expected[cid], cid


def test_tools_find_their_node_from_the_dialed_address(make_node, lab) -> None:
    """Without FABRICPROOF_LAB_NODE the node is field 3 of $SSH_CONNECTION, for the sh and the Python paths."""
    import subprocess

    node = make_node("dgx-h100")
    env = {"PATH": f"{lab}/bin:/usr/bin:/bin", "SSH_CONNECTION": f"127.0.0.1 40022 {node.address} 2222"}
    run = lambda *argv: subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)  # noqa: E731
    assert run("nvidia-smi", "-L").stdout == node.run("nvidia-smi", "-L").stdout != ""
    assert run("dpkg-query", "-W", "nvidia-driver-535").stdout == "nvidia-driver-535\t535.161.08-0ubuntu1\n"
    assert run("cat", "/proc/cmdline").stdout == node.state()["cmdline"] + "\n"
    lost = subprocess.run(["nvidia-smi", "-L"], env={"PATH": f"{lab}/bin:/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=30)
    assert lost.returncode == 1 and "no emulated node here" in lost.stderr


def test_installed_tools_are_posix_sh_and_readable_by_any_user(lab) -> None:
    import stat
    import subprocess

    scripts = sorted((lab / "bin").iterdir())
    assert {"nvidia-smi", "ibstat", "systemctl", "apt-get", "cat", "tail", "sudo"} <= {p.name for p in scripts}
    for script in scripts:
        assert script.read_text().startswith("#!/bin/sh\n")
        assert script.stat().st_mode & 0o755 == 0o755
        assert subprocess.run(["/bin/sh", "-n", str(script)], capture_output=True).returncode == 0, script.name
    for py in (lab / "lib").rglob("*.py"):
        assert py.stat().st_mode & stat.S_IROTH
    # self-contained: every module, sub-packages' too, imports under /usr/bin/python3 without site-packages (stdlib,
    # itself and the tools vocabulary copied beside it)
    emu = lab / "lib" / "fabricproof_lab_emu"
    mods = sorted(".".join(p.relative_to(emu).with_suffix("").parts) for p in emu.rglob("*.py") if p.stem != "__init__")
    code = f"import sys; sys.path.insert(0, {str(lab / 'lib')!r}); " + "; ".join(
        f"import fabricproof_lab_emu.{m}" for m in mods)
    r = subprocess.run(["/usr/bin/python3", "-S", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
