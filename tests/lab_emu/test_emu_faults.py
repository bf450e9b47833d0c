"""The fault catalog: stable names, real check ids, outputs that change and change back, tools that hang or
print garbage, counters that grow, and an upgrade that breaks Fabric Manager."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from functools import cache
from pathlib import Path

import pytest
from fabricproof.collectors import COLLECTORS, ParseError
from fabricproof.judging import catalog
from fabricproof_lab.emu import api, faults, model, outputs
from fabricproof_lab.emu.faults import FAULTS, FaultError
from fabricproof_lab.emu.faults import subnet
from fabricproof_lab.emu.faults.nvlink import ERROR_STEP

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {"fm-down", "fm-driver-mismatch", "fabric-in-progress", "fabric-insufficient-resources",
            "cluster-uuid-mismatch", "nvlink-inactive", "nvlink-speed-degraded", "nvlink-errors-growing",
            "nvswitch-missing", "nvswitch-fw-drift", "ib-port-down", "ib-port-polling", "ib-no-sm", "ib-rate-degraded",
            "hca-fw-drift", "psid-change", "mtu-wrong", "peermem-missing", "acs-enabled", "gpu-nic-affinity",
            "driver-drift", "imex-not-ready", "tool-hangs", "tool-garbage", "upgrade-breaks-fm"}

# Outputs each fault must change (keys of outputs.COMMANDS / host files under root/).
EFFECTS = {
    "fm-down": {"fm_service", "active_fm"},
    "fm-driver-mismatch": {"fm_version", "fm_service", "root:var/log/fabricmanager.log"},
    "fm-restarts": {"fm_service"}, "fm-config-drift": {"root:usr/share/nvidia/nvswitch/fabricmanager.cfg"},
    "fabric-in-progress": {"nvidia_smi_q", "nvidia_smi_q_xml", "nvidia_smi_query_gpu"},
    "fabric-insufficient-resources": {"nvidia_smi_q", "nvidia_smi_q_xml"},
    "cluster-uuid-mismatch": {"nvidia_smi_q", "nvidia_smi_q_xml"},
    "nvlink-inactive": {"nvlink_status", "nvlink_caps", "topo"}, "nvlink-speed-degraded": {"nvlink_status"},
    "nvlink-errors-growing": {"nvlink_errors"},
    "nvswitch-missing": {"nvswitch_pci", "lspci_vvv", "nvlink_status", "fm_service"},
    "nvswitch-fw-drift": {"nvswitch_firmware"}, "nvswitch-sxid-fatal": {"kernel_log", "root:var/log/fabricmanager.log"},
    "ib-port-down": {"ibstat", "ibv_devinfo", "ibdev2netdev", "root:sys/class/infiniband/mlx5_2/ports/1/state"},
    "ib-port-polling": {"ibstat", "ibv_devinfo", "root:sys/class/infiniband/mlx5_2/ports/1/phys_state"},
    "ib-no-sm": {"ibstat", "ibv_devinfo", "rdma_link"}, "ib-rate-degraded": {"ibstat", "ibstatus"},
    "ib-link-flap": {"kernel_log"},
    "hca-fw-drift": {"ibstat", "mlxfwmanager", "root:sys/class/infiniband/mlx5_3/fw_ver"},
    "psid-change": {"ibv_devinfo", "mlxfwmanager"},
    "mtu-wrong": {"ibv_devinfo"}, "peermem-missing": {"lsmod"}, "legacy-peermem": {"lsmod"},
    "acs-enabled": {"lspci_vvv"}, "gpu-nic-affinity": {"topo", "lspci_vvv", "mlxfwmanager"},
    "driver-drift": {"nvidia_smi_q", "root:proc/driver/nvidia/version"}, "imex-not-ready": {"imex_nodes"},
    "imex-down": {"imex_service", "imex_nodes"}, "gpu-xid-79": {"kernel_log"},
    "remapped-rows-pending": {"nvidia_smi_q", "nvidia_smi_q_xml"},
    "gpu-throttle": {"nvidia_smi_q", "nvidia_smi_query_gpu"},
    "persistence-off": {"nvidia_smi_q", "nvidia_smi_query_gpu"}, "pcie-downtrained": {"nvidia_smi_q", "lspci_vvv"},
    "iommu-translated": {"root:proc/cmdline"}, "tool-hangs": {"nvidia_smi_q", "nvlink_status", "topo"},
    "tool-garbage": {"ibstat"}, "tool-floods": {"ibstat"}, "upgrade-breaks-fm": set(),
    "ecc-uncorrectable": {"nvidia_smi_q", "nvidia_smi_q_xml"},
    "fabric-route-unhealthy": {"nvidia_smi_q", "nvidia_smi_q_xml"},
    "fabric-access-timeout": {"nvidia_smi_q", "nvidia_smi_q_xml"},
    "nvlink5-netir-fatal": {"kernel_log", "nvidia_smi_q", "nvidia_smi_q_xml"},
    "nvlink5-errors-growing": {"nvlink_errors"},
    "imex-channel-missing": {"root:dev/nvidia-caps-imex-channels/channel0"},
    "ib-pkey-missing": {"root:sys/class/infiniband/mlx5_0/ports/1/pkeys/0", "root:sys/class/infiniband/mlx5_0/ports/1/pkeys/1"}, "ib-guid-duplicate": {"ibstat"},
    "ib-ber-high": {"mlxlink_3"},
    # probe-only and idle-state faults: the collectors' outputs stay healthy (test_emu_probes.py proves their effect)
    "gpu-busy": set(), "slurm-job": set(), "nvlink-degraded": set(), "hca-degraded": set(),
    "hca-multinode-slow": set(), "path-slow-pair": set(),  # only a collective across nodes shows them
    "pcie-x8": {"nvidia_smi_q", "nvidia_smi_query_gpu", "lspci_vvv"},
    # fabric faults change the lab's ibsim fabric (tests/lab/test_lab_fabric.py); the node's own outputs change only
    # where its port does
    "subnet-rails-swapped": set(), "subnet-hca-wrong-port": set(), "subnet-uplink-missing": set(),
    "subnet-link-1x": {"ibstat", "ibstatus", "root:sys/class/infiniband/mlx5_3/ports/1/rate"},
    "subnet-link-slow": {"ibstat", "ibstatus", "root:sys/class/infiniband/mlx5_1/ports/1/rate"},
    "subnet-switch-errors": set(), "subnet-extra-link": set(), "subnet-duplicate-desc": set(),
    "subnet-hca-unplugged": {"ibstat", "ibv_devinfo", "root:sys/class/infiniband/mlx5_2/ports/1/state"},
}
# Outputs that carry the lab clock or boot logs: they move on every event and are not compared.
CLOCKED = re.compile(r'^(Timestamp|\s*<timestamp>|\s*"timestamp")')


def _snapshot(view: dict) -> dict[str, str]:
    snap = {k: f"{o.stdout}\n--\n{o.stderr}\n--\n{o.rc} {o.special}" for k, o in outputs.render_outputs(view).items()}
    snap.update({f"root:{k}": "<absent>" if v is None else v for k, v in outputs.root_files(view).items()})
    return {k: "\n".join(line for line in v.split("\n") if not CLOCKED.match(line)) for k, v in snap.items()}


def _node(profile: str) -> dict:
    node = model.new_node(profile, 3, 1 if profile == "gb200-nvl72" else None, "n-0003", "127.10.0.4")
    if profile == "gb200-nvl72":
        node["imex_peers"] = ["127.10.0.4", "127.10.0.5", "127.10.0.6", "127.10.0.7"]
    return node


@cache
def _healthy(profile: str) -> dict[str, str]:
    """A fresh node's snapshot, once a profile rather than once a fault (~70 faults a profile): _node is
    deterministic and the snapshot drops the clocked lines. Only read."""
    return _snapshot(faults.view(_node(profile)))


def test_catalog_is_large_stable_and_names_real_checks() -> None:
    assert len(FAULTS) >= 18 and REQUIRED <= set(FAULTS)
    check_ids = {re.search(r"^id: (\S+)$", p.read_text(), re.M).group(1) for p in (REPO / "checks").rglob("*.yaml")}
    for name, fault in FAULTS.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", name) and fault.name == name
        assert fault.description and fault.kind in ("overlay", "state", "trigger", "fabric")
        assert set(fault.profiles) <= {"dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72"}
        used = set(fault.catches) | set(fault.catches_over_time) | set(fault.catches_fleet)
        for p in fault.profiles:
            used |= set(fault.catches_for(p)) | set(fault.catches_fleet_for(p))
        assert used <= check_ids, (name, sorted(used - check_ids))
        probes = set(fault.catches_probes).union(*(fault.catches_probes_for(p) for p in fault.profiles))
        assert probes <= check_ids and all(c.startswith("perf.") for c in probes), (name, sorted(probes))
        assert not (fault.blocks_probes and probes), name  # a node that is not idle is skipped, never measured
        assert set(fault.catches_collective) <= {c for c in check_ids if c.startswith("perf.collective")}, name
        # A fabric fault names the subnet checks of issue 21's diff (checks/subnet/, once they are in the catalog).
        assert bool(fault.catches_subnet) == (fault.kind == "fabric"), name
        subnet_ids = {c for c in check_ids if c.startswith("subnet.")} or set(subnet.SUBNET_CHECKS)
        assert set(fault.catches_subnet) <= subnet_ids, (name, sorted(set(fault.catches_subnet) - subnet_ids))
        doc = json.loads(json.dumps(fault.to_dict()))
        assert {"name", "description", "catches", "catches_over_time", "catches_subnet"} <= doc.keys()
    assert set(EFFECTS) == set(FAULTS), "every fault needs an expected effect in this test"


def test_the_catalog_is_one_module_per_family_like_the_checks() -> None:
    """faults/ holds a module per family, each declaring its FAULTS, and the registry is their union: a fault lives
    with the family of a check it catches (checks/<family>/), a load-only or idle fault in perf, a broken tool in
    tool."""
    modules = {p.stem for p in Path(faults.__file__).parent.glob("*.py")} - {"__init__", "base"}
    assert {m.__name__.rsplit(".", 1)[1] for m in faults.FAMILIES} == modules
    declared = [f.name for m in faults.FAMILIES for f in m.FAULTS]
    assert len(declared) == len(set(declared)) and set(declared) == set(FAULTS)
    family_of = {c.id: c.family for c in catalog.load()}
    for module in faults.FAMILIES:
        family = module.__name__.rsplit(".", 1)[1]
        for fault in module.FAULTS:
            caught = set(fault.catches) | set(fault.catches_over_time) | set(fault.catches_fleet)
            caught = caught.union(*(fault.catches_for(p) for p in fault.profiles))
            if family == "subnet":  # what the fabric diff finds; the node's own view may fail ib.* checks besides
                assert fault.kind == "fabric" and {c.split(".")[0] for c in fault.catches_subnet} == {"subnet"}
            elif family == "perf":
                assert fault.catches_probes or fault.blocks_probes or fault.catches_collective, fault.name
            elif family == "tool":
                assert fault.breaks and not caught, fault.name
            else:
                assert not caught or family in {family_of[c] for c in caught}, (fault.name, family)


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_changes_its_outputs_and_clearing_restores_them(name: str) -> None:
    fault = FAULTS[name]
    for profile in fault.profiles:
        node = _node(profile)
        healthy = _healthy(profile)
        faults.inject(node, name)
        faulty = _snapshot(faults.view(node))
        unchanged = sorted(k for k in EFFECTS[name] if faulty[k] == healthy[k])
        assert not unchanged, (profile, unchanged)
        assert name in node["faults"]
        faults.clear(node, name)
        assert node["faults"] == {}
        cleared = _snapshot(faults.view(node))
        logs = {"fm_journal", "kernel_log", "journal_imex", "root:var/log/fabricmanager.log"}
        differ = sorted(k for k in healthy if k not in logs and cleared[k] != healthy[k])
        assert not differ, (profile, differ)


def test_faults_refuse_unknown_names_and_other_platforms() -> None:
    node = _node("dgx-a100")
    with pytest.raises(FaultError, match="unknown fault 'fm-sad'"):
        faults.inject(node, "fm-sad")
    with pytest.raises(FaultError, match="does not apply to profile dgx-a100"):
        faults.inject(node, "imex-not-ready")
    faults.inject(node, "mtu-wrong")
    faults.inject(node, "mtu-wrong")  # idempotent
    assert list(node["faults"]) == ["mtu-wrong"]


def test_inject_and_clear_through_the_lab_dir(make_node, lab: Path) -> None:
    node = make_node("dgx-h100")
    api.inject(lab, node.address, "peermem-missing")
    api.inject(lab, node.address, "ib-port-down")
    assert api.active_faults(lab, node.address) == ["ib-port-down", "peermem-missing"]
    assert "nvidia_peermem" not in node.run("lsmod").stdout
    assert "State: Down" in node.run("ibstat").stdout
    assert api.clear(lab, node.address, "ib-port-down") == ["ib-port-down"]
    assert "State: Down" not in node.run("ibstat").stdout
    node.run("modprobe", "nvidia_peermem")  # the real remediation fixes a state fault
    assert "nvidia_peermem" in node.run("lsmod").stdout
    assert api.clear(lab, node.address) == ["peermem-missing"] and api.active_faults(lab, node.address) == []


def test_tool_hangs_until_the_caller_gives_up_and_then_goes_away(make_node, lab: Path) -> None:
    node = make_node("dgx-h100")
    api.inject(lab, node.address, "tool-hangs")
    with pytest.raises(subprocess.TimeoutExpired):
        node.run("nvidia-smi", "-q", timeout=1.5)
    # like an SSH channel closing: the reader goes away and the hung tool exits on its own
    proc = subprocess.Popen(["nvidia-smi", "nvlink", "-s"], env=node.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    assert proc.poll() is None
    proc.stdout.close()
    assert proc.wait(timeout=5) == 124
    assert node.run("ibstat").returncode == 0  # other tools are unaffected


def test_tool_garbage_makes_the_ibstat_parser_refuse(make_node, lab: Path) -> None:
    node = make_node("hgx-h200")
    api.inject(lab, node.address, "tool-garbage")
    r = node.run("ibstat")
    assert r.returncode == 0 and r.stdout
    with pytest.raises(ParseError):
        COLLECTORS["ibstat"].parse(r.stdout)


def test_nvlink_error_counters_grow_between_snapshots(make_node, lab: Path) -> None:
    node = make_node("dgx-a100")
    api.inject(lab, node.address, "nvlink-errors-growing")
    first = COLLECTORS["nvlink_errors"].parse(node.run("nvidia-smi", "nvlink", "-e").stdout)["totals"]
    second = COLLECTORS["nvlink_errors"].parse(node.run("nvidia-smi", "nvlink", "-e").stdout)["totals"]
    step = ERROR_STEP
    assert second["crc"] - first["crc"] == step["crc_flit"] + step["crc_data"] > 10
    assert second["replay"] - first["replay"] == step["replay"] and second["recovery"] > first["recovery"]



def test_a_read_while_the_fault_is_injected_is_answered_by_the_old_output_or_the_new(make_node, lab: Path,
                                                                                    monkeypatch) -> None:
    """Injecting a growing-counter fault turns out/nvlink_errors (a plain file) into out/nvlink_errors.json. A soak's
    read racing it must find one of them. Real tool runs at the moment the plain file goes: the one before reads
    it; the one after is the growing answer, waiting for the injection to end (it counts a read under the node's
    lock), not a fallback render of the state that counts nothing."""
    node = make_node("dgx-h100")
    plain = node.dir / "out" / "nvlink_errors"
    assert plain.exists()
    unlink, runs = os.unlink, []

    def run() -> subprocess.Popen:
        return subprocess.Popen(["nvidia-smi", "nvlink", "-e"], env=node.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def blocked_on_a_lock(pid: int) -> bool:
        return any(line.split()[2:3] == ["FLOCK"] and line.split()[5:6] == [str(pid)]
                   for line in Path("/proc/locks").read_text().splitlines() if " -> " in line)

    def spied(path, *args, **kwargs):
        if str(path) == str(plain):
            runs.append(run().communicate(timeout=60))
            unlink(path, *args, **kwargs)
            after = run()
            deadline = time.monotonic() + 60  # until it is done or waits for the injection's lock
            while after.poll() is None and not blocked_on_a_lock(after.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            runs.append(after)
        else:
            unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", spied)
    api.inject(lab, node.address, "nvlink-errors-growing")
    monkeypatch.undo()
    (out0, err0), after = runs
    out1, err1 = after.communicate(timeout=60)
    assert (err0, err1, after.returncode) == ("", "", 0)
    totals = [COLLECTORS["nvlink_errors"].parse(out)["totals"]["crc"] for out in (out0, out1)]
    assert totals == [0, 2 * (ERROR_STEP["crc_flit"] + ERROR_STEP["crc_data"])]  # grown once at inject, once read
    assert node.state()["ticks"] == 1  # the read after counted, as every read of the growing counters does

def test_upgrade_breaks_fm_leaves_fm_behind_once(make_node, lab: Path) -> None:
    node = make_node("dgx-h100")
    api.inject(lab, node.address, "upgrade-breaks-fm")
    r = node.run("apt-get", "install", "-y", "nvidia-driver-535=535.183.01-0ubuntu1",
                 "nvidia-fabricmanager-535=535.183.01-1")
    assert r.returncode == 0
    assert node.run("nv-fabricmanager", "--version").stdout == "Fabric Manager version is : 535.161.08\n"
    assert api.active_faults(lab, node.address) == []  # consumed
    node.run("reboot")
    journal = COLLECTORS["fm_journal"].parse(node.run("journalctl", "-u", "nvidia-fabricmanager", "-b", "--no-pager").stdout)
    assert journal["version_mismatch"] == {"fm_version": "535.161.08", "driver_version": "535.183.01"}
    # the rollback/fix path works as on a real node: install the matching FM again
    assert node.run("apt-get", "install", "-y", "nvidia-fabricmanager-535=535.183.01-1").returncode == 0
    assert node.run("systemctl", "start", "nvidia-fabricmanager").returncode == 0


def test_reboot_clears_faults_whose_evidence_is_the_running_boot(make_node, lab: Path) -> None:
    node = make_node("dgx-h100")
    for name in ("gpu-xid-79", "peermem-missing", "acs-enabled"):
        api.inject(lab, node.address, name)
    node.run("reboot")
    # the Xid is in the previous boot's log and the module loads again; ACS is a BIOS setting and stays
    assert api.active_faults(lab, node.address) == ["acs-enabled"]
    assert COLLECTORS["kernel_log"].parse(node.run("journalctl", "-k", "-b", "--no-pager").stdout)["xid_codes"] == []
    assert COLLECTORS["lspci_vvv"].parse(node.run("lspci", "-vvv").stdout)["gpu_nic_path_acs_enabled"] == ["17:00.0"]
