"""The node model: one emulated GPU node's state as a versioned, JSON-able dict, built from a profile."""

from __future__ import annotations

import json

from .digest import sha256
from .profiles import KERNEL_MODULES, PROFILES, packages_for, rack_fabric

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

#: Bump when the layout of the state dict changes; load() refuses other versions.
SCHEMA_VERSION = 1

#: The lab clock starts here (2025-01-06 09:00:00 UTC); every event advances it, so renders are
#: deterministic functions of the state and never of the wall clock.
EPOCH = 1736154000
UPTIME_AT_CREATE = 86400

Node = dict[str, "Any"]


def _digest(*parts: object) -> str:
    return sha256("/".join(str(p) for p in parts).encode()).hexdigest()


def _uuid_text(hexs: str) -> str:
    return f"{hexs[0:8]}-{hexs[8:12]}-{hexs[12:16]}-{hexs[16:20]}-{hexs[20:32]}"


def gpu_uuid(hostname: str, index: int) -> str:
    """A stable GPU UUID per host and GPU index."""
    return "GPU-" + _uuid_text(_digest(hostname, "gpu", index))


def nvswitch_uuid(hostname: str, index: int) -> str:
    """A stable NVSwitch UUID (FM log prints them upper-case with an SWX- prefix)."""
    return "SWX-" + _uuid_text(_digest(hostname, "nvswitch", index)).upper()


def _bus_id(domain: str, bus: str) -> str:
    """nvidia-smi's bus id: 8-digit domain, upper-case bus (as in the corpus)."""
    return f"{int(domain, 16):08X}:{bus.upper()}:00.0"


def _bdf(domain: str, bus: str, dev: int = 0, fn: int = 0) -> str:
    return f"{domain}:{bus}:{dev:02x}.{fn}"


def _node_guid(prefix: str, index: int, hca: int) -> str:
    return f"{prefix}{index & 0xFFFF:04x}{hca:02x}"


def ib_base_lid(index: int, n: int) -> int:
    """The LID the lab's subnet gives HCA n of the node of this index (unique up to ~3,000 nodes)."""
    return (index * 16 + n + 2) % 49150 + 1


def compute_hca_identities(profile_name: str, index: int) -> list[tuple[str, int, str, int]]:
    """(name, rail, node GUID, LID) of each compute HCA of a node, as new_node gives them: what the lab's
    InfiniBand fabric (fabricproof_lab.fabric) cables."""
    spec = PROFILES[profile_name]["hcas"]["compute"]
    if spec["link_layer"] != "InfiniBand":
        return []
    return [(f"mlx5_{j}", j, _node_guid(spec["guid_prefix"], index, j), ib_base_lid(index, j))
            for j in range(spec["count"])]


def _nvlink(gbps: float) -> dict[str, Any]:
    return {"active": True, "gbps": gbps, "replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}


def _gpus(profile: dict, hostname: str, index: int, rack: int | None) -> list[dict[str, Any]]:
    g = profile["gpu"]
    nv = profile["nvlink"]
    domains = g.get("domains") or ("0000",) * g["count"]
    fabric = rack_fabric(profile["name"], rack if rack is not None else 0)
    gpus = []
    for i in range(g["count"]):
        bus = g["buses"][i]
        if not g["fabric_registration"]:
            fab = {"state": None, "status": None, "clique_id": None, "cluster_uuid": None, "health": None}
        elif fabric is not None:
            clique, cluster = fabric
            fab = {"state": "Completed", "status": "Success", "clique_id": clique, "cluster_uuid": cluster,
                   "health": {"summary": "Healthy", "bandwidth": "Full", "route_recovery_in_progress": "False",
                              "route_unhealthy": "False", "access_timeout_recovery": "False",
                              "incorrect_configuration": "None"}}  # as the real GB300 of R580 prints it
        else:
            fab = {"state": "Completed", "status": "Success", "clique_id": profile["fabric"]["clique_id"],
                   "cluster_uuid": profile["fabric"]["cluster_uuid"], "health": None}
        gpus.append(
            {
                "index": i,
                "domain": domains[i],
                "bus": bus,
                "bus_id": _bus_id(domains[i], bus),
                "uuid": gpu_uuid(hostname, i),
                "serial": str(1652924000000 + int(_digest(hostname, "serial", i)[:8], 16) % 1000000),
                "module_id": i + 1,
                "vbios": g["vbios"],
                "vbios_pending": None,
                "persistence_mode": g["persistence_mode"],
                "ecc_mode": g["ecc_mode"],
                "power_limit_w": g["power_limit_w"],
                "pcie_gen": g["pcie_gen"],
                "pcie_width": g["pcie_width"],
                "throttle_reasons": ["gpu_idle"],  # an idle GPU reports the Idle clocks event reason
                "remapped_rows": {"pending": False, "failure": False, "correctable": 0, "uncorrectable": 0},
                # ECC counters per scope (volatile: since the driver loaded); tags as in nvidia-smi -q -x
                "ecc": {"volatile": {}, "aggregate": {}},
                "recovery_action": "None",  # GPU Recovery Action (nvidia-smi R570+, NVML)
                "fabric": fab,
                "nvlinks": [_nvlink(nv["gbps"]) for _ in range(nv["links_per_gpu"])],
            }
        )
    return gpus


def _nvswitches(profile: dict, hostname: str) -> list[dict[str, Any]]:
    ns = profile["nvswitch"]
    return [
        {"index": i, "bus": bus, "bdf": _bdf("0000", bus), "uuid": nvswitch_uuid(hostname, i),
         "firmware": ns["firmware"], "firmware_pending": None, "present": True}
        for i, bus in enumerate(ns["buses"])
    ]


def _hca_records(profile: dict, index: int) -> list[dict[str, Any]]:
    """ConnectX/BlueField devices: compute rails first (mlx5_0..), then storage/DPU ports."""
    out: list[dict[str, Any]] = []
    for role in ("compute", "storage"):
        spec = profile["hcas"][role]
        if not spec:
            continue
        for j in range(spec["count"]):
            n = len(out)
            if "domains" in spec:
                domain, bus = spec["domains"][j], "03"
            elif role == "compute":
                domain, bus = "0000", profile["pcie"]["rails"][j]["nic_bus"]
            else:
                domain, bus = "0000", spec["buses"][j]
            guid = _node_guid(spec["guid_prefix"], index, n)
            is_ib = spec["link_layer"] == "InfiniBand"
            out.append(
                {
                    "name": f"mlx5_{n}",
                    "role": role,
                    "rail": j if role == "compute" else None,
                    "bdf": _bdf(domain, bus),
                    "ca_type": spec["ca_type"],
                    "device_type": spec["device_type"],
                    "part_number": spec["part_number"],
                    "description": spec["description"],
                    "lspci_name": spec["lspci_name"],
                    "psid": spec["psid"],
                    "fw": spec["fw"],
                    "fw_pending": None,
                    "pxe": spec["pxe"],
                    "uefi": spec["uefi"],
                    "node_guid": guid,
                    "ports": [
                        {
                            "port": 1,
                            "state": "Active",
                            "phys_state": "LinkUp",
                            "rate": spec["rate"],
                            "width": spec["width"],
                            "link_layer": spec["link_layer"],
                            "base_lid": ib_base_lid(index, n) if is_ib else 0,
                            "sm_lid": 1 if is_ib else 0,
                            "port_guid": guid,
                            "active_mtu": 4096,
                            "max_mtu": 4096,
                            "netdev": f"ib{j}" if is_ib else f"enp{int(bus, 16)}s0f0np0",
                            "ipv4": None if is_ib else f"10.{200 + (n % 50)}.{index // 250}.{index % 250 + 1}",
                            "counters": {},
                        }
                    ],
                }
            )
    return out


def _pcie_tree(profile: dict, hcas: list[dict[str, Any]], gpus: list[dict[str, Any]],
               nvswitches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PCIe bridges and endpoints: root port -> switch -> GPU + rail NIC (x86), Grace root ports (GB200)."""
    acs_off = {"SrcValid": False, "TransBlk": False, "ReqRedir": False, "CmpltRedir": False,
               "UpstreamFwd": False, "EgressCtrl": False, "DirectTrans": False}
    acs_on = dict(acs_off, SrcValid=True, ReqRedir=True, CmpltRedir=True, UpstreamFwd=True)
    pcie = profile["pcie"]
    devs: list[dict[str, Any]] = []

    def bridge(bdf: str, name: str, parent: str | None, sec: int, sub: int, kind: str, acs: dict | None,
               numa: int, speed: str, width: int = 16) -> None:
        devs.append({"bdf": bdf, "kind": kind, "name": name, "parent": parent, "secondary": sec, "subordinate": sub,
                     "acs": dict(acs) if acs is not None else None,
                     "acs_boot": dict(acs) if acs is not None else None, "numa": numa, "speed": speed,
                     "width": width})

    def endpoint(bdf: str, kind: str, name: str, parent: str, numa: int, ref: str, speed: str,
                 width: int = 16) -> None:
        devs.append({"bdf": bdf, "kind": kind, "name": name, "parent": parent, "secondary": None, "subordinate": None,
                     "acs": None, "acs_boot": None, "numa": numa, "ref": ref, "speed": speed, "width": width})

    speed = pcie["link_speed"]
    gpu_dev = profile["gpu"]["pci_device_id"]
    if profile["arch"] == "x86_64":
        half = len(gpus) // 2
        compute = [h for h in hcas if h["role"] == "compute"]
        for i, gpu in enumerate(gpus):
            g = int(gpu["bus"], 16)
            numa = 0 if i < half else 1
            root, up = f"0000:{g - 4:02x}:01.0", f"0000:{g - 3:02x}:00.0"
            d_gpu, d_nic = f"0000:{g - 2:02x}:00.0", f"0000:{g - 2:02x}:01.0"
            bridge(root, pcie["root_port"], None, g - 3, g + 1, "root_port", acs_off, numa, speed)
            bridge(up, pcie["switch"], root, g - 2, g + 1, "switch_up", None, numa, speed)
            bridge(d_gpu, pcie["switch"], up, g, g, "switch_down", acs_off, numa, speed)
            bridge(d_nic, pcie["switch"], up, g + 1, g + 1, "switch_down", acs_off, numa, speed)
            endpoint(f"0000:{gpu['bus']}:00.0", "gpu", f"NVIDIA Corporation Device {gpu_dev} (rev a1)", d_gpu,
                     numa, gpu["uuid"], speed)
            nic = compute[i]
            endpoint(nic["bdf"], "nic", nic["lspci_name"], d_nic, numa, nic["name"], speed)
        for hca in hcas:
            if hca["role"] != "storage":
                continue
            b = int(hca["bdf"].split(":")[1], 16)
            root = f"0000:{b - 1:02x}:01.0"
            bridge(root, pcie["root_port"], None, b, b, "root_port", acs_off, 1, speed)
            endpoint(hca["bdf"], "nic", hca["lspci_name"], root, 1, hca["name"], speed)
        if nvswitches:
            # The NVSwitches sit behind their own PCIe switch; on real HGX boards its downstream ports
            # have ACS enabled (corpus lspci -vvv, PMC-Sierra 4128), which is fine: no GPU/NIC below.
            ns0 = int(nvswitches[0]["bus"], 16)
            root, up = f"0000:{ns0 - 3:02x}:01.0", f"0000:{ns0 - 2:02x}:00.0"
            last = int(nvswitches[-1]["bus"], 16)
            bridge(root, pcie["root_port"], None, ns0 - 2, last, "root_port", acs_off, 1, speed)
            bridge(up, "PMC-Sierra Inc. Device 4128", root, ns0 - 1, last, "switch_up", None, 1, "16GT/s", 2)
            for k, sw in enumerate(nvswitches):
                down = f"0000:{ns0 - 1:02x}:{k:02x}.0"
                b = int(sw["bus"], 16)
                bridge(down, "PMC-Sierra Inc. Device 4128", up, b, b, "switch_down", acs_on, 1, "16GT/s", 2)
                endpoint(sw["bdf"], "nvswitch", f"NVIDIA Corporation Device {profile['nvswitch']['pci_device_id']} (rev a1)",
                         down, 1, sw["uuid"], "16GT/s", 2)
    else:
        # Grace: every GPU and NIC has its own root port in its own PCI domain (corpus lspci gb200).
        for i, gpu in enumerate(gpus):
            d = gpu["domain"]
            root = f"{d}:00:00.0"
            bridge(root, "NVIDIA Corporation Device 22b1", None, 1, 1, "root_port", acs_off, i // 2, speed)
            endpoint(f"{d}:01:00.0", "gpu", f"NVIDIA Corporation Device {gpu_dev} (rev a1)", root,
                     2 + 8 * i, gpu["uuid"], speed)
        for hca in hcas:
            d = hca["bdf"].split(":")[0]
            numa = 0 if int(d, 16) < 0x10 else 1
            bridge_name = ("Mellanox Technologies MT2910 Family [ConnectX-7 PCIe Bridge]" if hca["role"] == "compute"
                           else "Mellanox Technologies MT43244 Family [BlueField-3 SoC PCIe Bridge] (rev 01)")
            root, up, down = f"{d}:00:00.0", f"{d}:01:00.0", f"{d}:02:00.0"
            bridge(root, "NVIDIA Corporation Device 22b2", None, 1, 5, "root_port", acs_off, numa, speed)
            bridge(up, bridge_name, root, 2, 5, "switch_up", None, numa, speed)
            bridge(down, bridge_name, up, 3, 3, "switch_down", acs_off, numa, speed)
            endpoint(hca["bdf"], "nic", hca["lspci_name"], down, numa, hca["name"], speed)
    devs.sort(key=lambda d: d["bdf"])
    return devs


def new_node(profile_name: str, index: int, rack: int | None, hostname: str, address: str) -> Node:
    """A healthy node of a profile, as it looks a day after its last boot."""
    profile = PROFILES[profile_name]
    gpus = _gpus(profile, hostname, index, rack)
    nvswitches = _nvswitches(profile, hostname)
    hcas = _hca_records(profile, index)
    clock = EPOCH + (index * 37) % 3600
    services: dict[str, dict[str, Any]] = {
        "nvidia-persistenced": _service("active", "enabled"),
        "nvidia-dcgm": _service("active", "enabled"),  # a GPU client playbooks stop before a driver change
        "slurmd": _service("active", "enabled"),
    }
    if profile["fm"]["present"]:
        services["nvidia-fabricmanager"] = _service("active", "enabled")
    if profile["imex"]["present"]:
        services["nvidia-imex"] = _service("active", "enabled")
    driver = profile["driver"]
    node: Node = {
        "schema": SCHEMA_VERSION,
        "address": address,
        "hostname": hostname,
        "profile": profile_name,
        "index": index,
        "rack": rack,
        "clock": clock,
        "boot_time": clock - UPTIME_AT_CREATE,
        "boot_count": 1,
        "kernel_release": profile["kernel_release"],
        "cmdline": profile["kernel_cmdline"].format(kernel=profile["kernel_release"],
                                                   root_uuid=_uuid_text(_digest(hostname, "root"))),
        "driver": {"loaded": driver["version"], "kernel_module": driver["kernel_module"]},
        "packages": packages_for(profile),
        "holds": [],
        "services": services,
        "fm_config": dict(profile["fm"]["config"]) if profile["fm"]["config"] else None,
        "modules": [name for name, _ in KERNEL_MODULES],
        "gpus": gpus,
        "nvswitches": nvswitches,
        "hcas": hcas,
        "pcie": _pcie_tree(profile, hcas, gpus, nvswitches),
        "imex_peers": [],  # filled by the lab when racks are known (addresses of the rack's trays)
        "slurm": {"state": "IDLE", "reason": None, "reason_user": None, "reason_time": None},
        "journal": {"fm": [], "imex": [], "kernel": []},
        "fm_log": [],
        "faults": {},
        "ticks": 0,
    }
    _boot_logs(node)
    return node


def attach_fabric(node: Node, attachment: dict[str, Any] | None) -> None:
    """Cable the node's InfiniBand compute HCAs to the lab's fabric (or take them off it). `attachment` is what the
    node's fabric-scope tools need (emu.simtools): ibsim's socket name, the CA they attach at, the fabric directory,
    whether speeds run one generation down, whether this is the vantage node, each HCA's LID in the subnet. ibsim gives
    a CA port the node GUID plus one, so the node's ibstat shows that port GUID too (the two views of one port
    agree), and the LIDs the fabric gives (unique in a mixed lab, whose profiles each count from 0)."""
    node["fabric"] = attachment
    lids = (attachment or {}).get("lids", {})
    for n, hca in enumerate(node["hcas"]):
        port = hca["ports"][0]
        if hca["role"] == "compute" and port["link_layer"] == "InfiniBand":
            port["port_guid"] = f"{int(hca['node_guid'], 16) + 1:016x}" if attachment else hca["node_guid"]
            port["base_lid"] = lids.get(hca["name"], ib_base_lid(node["index"], n))


def _service(active: str, enabled: str) -> dict[str, Any]:
    return {"active": active, "sub": "running" if active == "active" else "dead", "enabled": enabled,
            "restarts": 0, "result": "success", "since": None, "exit_status": 0}


# ---------------------------------------------------------------------------------------------
# Derived values (pure)
# ---------------------------------------------------------------------------------------------

def profile_of(node: Node) -> dict[str, Any]:
    """The profile dict a node was built from."""
    return PROFILES[node["profile"]]


def compute_hcas(node: Node) -> list[dict[str, Any]]:
    """The node's compute HCAs (not its storage or management ones), in order."""
    return [h for h in node["hcas"] if h["role"] == "compute"]


def _branch_pkg(node: Node, stem: str) -> tuple[str, str] | None:
    for name, ver in sorted(node["packages"].items()):
        if name.startswith(stem) and name[len(stem):].isdigit():
            return name, ver
    return None


def upstream_version(deb: str) -> str:
    """'535.161.08-0ubuntu1' -> '535.161.08'."""
    return deb.split("-", 1)[0].split(":", 1)[-1]


def installed_driver(node: Node) -> str | None:
    """Driver build of the installed nvidia-driver-<branch> package (user space: nvidia-smi, NVML)."""
    pkg = _branch_pkg(node, "nvidia-driver-")
    return upstream_version(pkg[1]) if pkg else None


def installed_fm(node: Node) -> str | None:
    """Fabric Manager build of the installed nvidia-fabricmanager-<branch> package."""
    pkg = _branch_pkg(node, "nvidia-fabricmanager-")
    return upstream_version(pkg[1]) if pkg else None


def installed_imex(node: Node) -> str | None:
    """IMEX build of the installed nvidia-imex-<branch> package."""
    pkg = _branch_pkg(node, "nvidia-imex-")
    return upstream_version(pkg[1]) if pkg else None


def branch_of(version: str) -> str:
    """'535.161.08' -> '535'."""
    return version.split(".", 1)[0]


def nvml_mismatch(node: Node) -> bool:
    """True when the user-space driver differs from the loaded kernel module (an upgrade before reboot)."""
    inst = installed_driver(node)
    return inst is not None and inst != node["driver"]["loaded"]


def copy_node(node: Node) -> Node:
    """A deep copy (faults render a modified copy, never the stored state); the state is plain JSON."""
    return json.loads(json.dumps(node))


# ---------------------------------------------------------------------------------------------
# Events: everything that changes the clock and appends log lines goes through here
# ---------------------------------------------------------------------------------------------

JOURNAL_LIMIT = 2000
FM_LOG_LIMIT = 4000


def advance(node: Node, seconds: int) -> int:
    """Move the lab clock forward and return the new time."""
    node["clock"] += seconds
    return node["clock"]


def journal(node: Node, unit: str, ident: str, message: str) -> None:
    """Append one journal record: (time, identifier, message); rendered as syslog-style lines."""
    lines = node["journal"].setdefault(unit, [])
    lines.append([node["clock"], ident, message])
    del lines[:-JOURNAL_LIMIT]


def fm_log(node: Node, level: str, message: str) -> None:
    """Append one line to /var/log/fabricmanager.log (level INFO/ERROR/WARNING, or RAW for continuation)."""
    node["fm_log"].append([node["clock"], level, message])
    del node["fm_log"][:-FM_LOG_LIMIT]


def fm_start(node: Node) -> bool:
    """Start nvidia-fabricmanager the way the real service does; returns True if it stays up.

    The real nv-fabricmanager refuses to run when its build differs from the loaded driver (the
    "don't match" line, then status=1/FAILURE); when it runs, GPUs register with the fabric.
    """
    svc = node["services"].get("nvidia-fabricmanager")
    fm_ver = installed_fm(node)
    if svc is None or fm_ver is None:
        return False
    pid = 1000 + node["clock"] % 30000
    journal(node, "fm", "systemd[1]", "Starting nvidia-fabricmanager.service - NVIDIA fabric manager service...")
    loaded = node["driver"]["loaded"]
    if fm_ver != loaded:
        msg = (f"fabric manager NVIDIA GPU driver interface version {fm_ver} don't match with driver version "
               f"{loaded}. Please update with matching NVIDIA driver package.")
        journal(node, "fm", f"nv-fabricmanager[{pid}]", msg)
        fm_log(node, "RAW", f"Fabric Manager Log initializing at: {_fm_init_stamp(node['clock'])}")
        fm_log(node, "ERROR", msg)
        journal(node, "fm", "systemd[1]",
                "nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE")
        journal(node, "fm", "systemd[1]", "nvidia-fabricmanager.service: Failed with result 'exit-code'.")
        journal(node, "fm", "systemd[1]", "Failed to start nvidia-fabricmanager.service - NVIDIA fabric manager service.")
        svc.update(active="failed", sub="failed", result="exit-code", exit_status=1, since=node["clock"])
        _fabric_pending(node)
        return False
    present = [s for s in node["nvswitches"] if s["present"]]
    expected = profile_of(node)["nvswitch"]["count"]
    _fm_startup_log(node, fm_ver, present)
    if len(present) != expected:
        # What FM prints when the NVSwitches it finds fit no known board topology (NVIDIA forum reports).
        msg = "detected number of NVSwitches don't match with any supported system topology, aborting fabric manager"
        fm_log(node, "ERROR", msg)
        journal(node, "fm", f"nv-fabricmanager[{pid}]", msg)
        journal(node, "fm", "systemd[1]",
                "nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE")
        journal(node, "fm", "systemd[1]", "nvidia-fabricmanager.service: Failed with result 'exit-code'.")
        journal(node, "fm", "systemd[1]", "Failed to start nvidia-fabricmanager.service - NVIDIA fabric manager service.")
        svc.update(active="failed", sub="failed", result="exit-code", exit_status=1, since=node["clock"])
        _fabric_pending(node)
        return False
    fm_log(node, "INFO", "Successfully configured all the available NVSwitches to route GPU NVLink traffic. NVLink "
                         "Peer-to-Peer support will be enabled once the GPUs are successfully registered with the "
                         "NVLink fabric.")
    journal(node, "fm", f"nv-fabricmanager[{pid}]", "Connected to 1 node.")
    journal(node, "fm", f"nv-fabricmanager[{pid}]",
            "Successfully configured all the available NVSwitches to route GPU NVLink traffic. NVLink Peer-to-Peer "
            "support will be enabled once the GPUs are successfully registered with the NVLink fabric.")
    journal(node, "fm", "systemd[1]", "Started nvidia-fabricmanager.service - NVIDIA fabric manager service.")
    svc.update(active="active", sub="running", result="success", exit_status=0, since=node["clock"])
    for gpu in node["gpus"]:
        if gpu["fabric"]["state"] is not None:
            gpu["fabric"]["state"], gpu["fabric"]["status"] = "Completed", "Success"
        advance(node, 1)
        fm_log(node, "INFO", f"added GPU with UUID {gpu['uuid']} based on NVLink Inband GPU probe request.")
    return True


def fm_stop(node: Node) -> None:
    """Stop nvidia-fabricmanager (fabric state of registered GPUs is kept, as on real systems)."""
    svc = node["services"].get("nvidia-fabricmanager")
    if svc is None or svc["active"] != "active":
        if svc is not None and svc["active"] == "failed":
            svc.update(active="inactive", sub="dead")
        return
    journal(node, "fm", "systemd[1]", "Stopping nvidia-fabricmanager.service - NVIDIA fabric manager service...")
    journal(node, "fm", "systemd[1]", "nvidia-fabricmanager.service: Deactivated successfully.")
    journal(node, "fm", "systemd[1]", "Stopped nvidia-fabricmanager.service - NVIDIA fabric manager service.")
    svc.update(active="inactive", sub="dead", result="success", since=node["clock"])


def _fabric_pending(node: Node) -> None:
    for gpu in node["gpus"]:
        if gpu["fabric"]["state"] is not None:
            gpu["fabric"]["state"], gpu["fabric"]["status"] = "In Progress", "N/A"


def _fm_init_stamp(t: int) -> str:
    import time

    return time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(t)) + ".208"


def _fm_startup_log(node: Node, fm_ver: str, present: list[dict[str, Any]]) -> None:
    cfg = node["fm_config"] or {}
    fm_log(node, "RAW", f"Fabric Manager Log initializing at: {_fm_init_stamp(node['clock'])}")
    fm_log(node, "INFO", f"Fabric Manager version {fm_ver} is running with the following configuration options")
    for label, key in (("Logging level", "LOG_LEVEL"), ("Logging file name/path", "LOG_FILE_NAME"),
                       ("Append to log file", "LOG_APPEND_TO_LOG"), ("Max Log file size", "LOG_FILE_MAX_SIZE"),
                       ("Use Syslog file", "LOG_USE_SYSLOG"),
                       ("Fabric Manager communication ports", "STARTING_TCP_PORT"),
                       ("Fabric Mode", "FABRIC_MODE"), ("Fabric Mode Restart", "FABRIC_MODE_RESTART"),
                       ("FM Library communication bind interface", "FM_CMD_BIND_INTERFACE"),
                       ("FM Library communication port number", "FM_CMD_PORT_NUMBER"),
                       ("Continue to run when facing failures", "FM_STAY_RESIDENT_ON_FAILURES"),
                       ("Option when facing GPU to NVSwitch NVLink failure", "ACCESS_LINK_FAILURE_MODE"),
                       ("Option when facing NVSwitch to NVSwitch NVLink failure", "TRUNK_LINK_FAILURE_MODE"),
                       ("Option when facing NVSwitch failure", "NVSWITCH_FAILURE_MODE"),
                       ("Abort CUDA jobs when FM exits", "ABORT_CUDA_JOBS_ON_FM_EXIT")):
        value = cfg.get(key, "")
        fm_log(node, "INFO", f"{label} = {value}" + (" (MBs)" if key == "LOG_FILE_MAX_SIZE" else ""))
    advance(node, 1)
    fm_log(node, "INFO", "Connected to 1 node.")
    fm_log(node, "INFO", "getting NVSwitch device information")
    fm_log(node, "INFO", "dumping all the detected NVSwitch information")
    arch = profile_of(node)["nvlink"]["nvswitch_gen"]
    for k, sw in enumerate(present):
        fm_log(node, "RAW", f"  Index: {k:02d}  Physical Id: {sw['index']}  PCI Bus ID: {_bus_id('0000', sw['bus'])}  "
                            f"Enabled Link Mask: ffffffff00000000  Arch Type: {arch}  UUID : {sw['uuid']}")


def kernel_boot_lines(node: Node) -> None:
    """The kernel messages of a boot that the collectors look at (driver load, HCA link up)."""
    drv = node["driver"]["loaded"]
    arch = "aarch64" if profile_of(node)["arch"] == "aarch64" else "x86_64"
    flavour = "Open Kernel Module" if node["driver"]["kernel_module"] == "open" else "Kernel Module"
    journal(node, "kernel", "kernel", f"Linux version {node['kernel_release']} (buildd@lcy02-amd64-043) #1 SMP")
    journal(node, "kernel", "kernel", f"Command line: {node['cmdline']}")
    journal(node, "kernel", "kernel",
            f"NVRM: loading NVIDIA UNIX {flavour} for {arch}  {drv}  Release Build  (dvs-builder@U16-I3-B03-4-3)")
    for hca in node["hcas"]:
        journal(node, "kernel", "kernel",
                f"mlx5_core {hca['bdf']}: firmware version: {hca['fw']}")
    for sw in node["nvswitches"]:
        if sw["present"]:
            journal(node, "kernel", "kernel", f"nvidia-nvswitch{sw['index']}: probe successful")


def _boot_logs(node: Node) -> None:
    saved = node["clock"]
    node["clock"] = node["boot_time"]
    kernel_boot_lines(node)
    advance(node, 40)
    for unit in ("nvidia-imex",):
        if unit in node["services"]:
            journal(node, "imex", "systemd[1]", "Started nvidia-imex.service - NVIDIA IMEX service.")
    if "nvidia-fabricmanager" in node["services"]:
        fm_start(node)
    node["clock"] = saved
