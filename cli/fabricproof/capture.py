"""Capture a baseline from a known-good (golden) node's facts, like Goss autoadd or NHC genconf. Pure."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from .platforms import platform_of
from .xids import default_policy

FORBIDDEN_THROTTLE = ["hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"]
# A healthy port's effective BER prints as the floor (15E-255); 1e-12 is the usual alarm level for NDR/HDR links.
MAX_EFFECTIVE_BER = 1e-12


def _get(doc: Any, *path: Any) -> Any:
    for p in path:
        if isinstance(doc, dict):
            doc = doc.get(p)
        elif isinstance(doc, list) and isinstance(p, int) and p < len(doc):
            doc = doc[p]
        else:
            return None
    return doc


def _one(values: list[Any]) -> Any:
    """The value when every item agrees, else None (a golden node that disagrees with itself pins nothing)."""
    vals = [v for v in values if v is not None]
    return vals[0] if vals and all(v == vals[0] for v in vals) else None


def _shared_pkey(ports: list[dict[str, Any]]) -> str | None:
    """The P_Key every InfiniBand port of the golden node holds: its site partition when there is exactly one
    besides the default partition, else the default partition (0xffff) when all hold it."""
    tables = [set(p.get("pkeys") or ()) for p in ports if p.get("link_layer") == "InfiniBand"]
    if not tables or not all(tables):
        return None
    shared = set.intersection(*tables)
    site = sorted(shared - {"0xffff", "0x7fff"})
    return site[0] if len(site) == 1 else ("0xffff" if "0xffff" in shared else None)


def _put(section: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != [] and value != {}:
        section[key] = value


def capture(facts: dict[str, Any]) -> dict[str, Any]:
    """Baseline values (spec.defaults) from one host's facts; only what the facts prove is written."""
    gpus = _get(facts, "gpu", "gpus") or []
    out: dict[str, Any] = {}
    name = _one([g.get("name") for g in gpus])
    platform = _one([platform_of(g) for g in gpus])
    _put(out, "platform", platform)

    gpu: dict[str, Any] = {}
    _put(gpu, "count", _get(facts, "gpu", "count"))
    _put(gpu, "model", "^" + re.escape(name).replace("\\ ", " ") + "$" if name else None)
    _put(gpu, "persistence", _one([g.get("persistence_mode") for g in gpus]))
    _put(gpu, "ecc", _one([g.get("ecc_mode") for g in gpus]))
    _put(gpu, "power_limit_w", _one([g.get("power_limit_w") for g in gpus]))
    _put(gpu, "pcie_gen", _one([g.get("pcie_gen") for g in gpus]))
    _put(gpu, "pcie_width", _one([g.get("pcie_width") for g in gpus]))
    if gpus:
        gpu["xid_policy"] = default_policy()
        gpu["forbidden_throttle_reasons"] = FORBIDDEN_THROTTLE
    _put(out, "gpu", gpu)

    driver: dict[str, Any] = {}
    _put(driver, "version", _get(facts, "gpu", "driver_version") or _get(facts, "driver", "version"))
    _put(driver, "kernel_module", _get(facts, "driver", "kernel_module"))
    _put(out, "driver", driver)
    _put(out, "cuda", {"version": _get(facts, "gpu", "cuda_version")} if _get(facts, "gpu", "cuda_version") else None)

    # FM's own version, or the version its log says it ran: either proves FM runs on this node.
    fm_version = _get(facts, "fm", "build", "version") or _get(facts, "fm", "log", "running_version")
    if fm_version and platform != "gb200":
        fm: dict[str, Any] = {"required": True, "version": fm_version, "max_restarts": 0}
        settings = _get(facts, "fm", "config", "settings") or {}
        cfg = {k: settings[k] for k in ("FABRIC_MODE", "FM_STAY_RESIDENT_ON_FAILURES", "ABORT_CUDA_JOBS_ON_FM_EXIT", "LOG_FILE_NAME") if k in settings}
        _put(fm, "config", cfg)
        out["fm"] = fm

    states = [_get(g, "fabric", "state") for g in gpus]
    if states and all(s == "Completed" for s in states):
        fabric: dict[str, Any] = {"required": True}
        if platform == "gb200":
            fabric.update(health_required=True, clique_required=True)
        out["fabric"] = fabric
    if _get(facts, "imex", "service", "active"):
        out["imex"] = {"required": True}

    nvl: dict[str, Any] = {}
    _put(nvl, "links_per_gpu", _get(facts, "nvlink", "status", "links_per_gpu_min"))
    _put(nvl, "link_gbps", _get(facts, "nvlink", "status", "gbps_min"))
    if nvl:
        nvl.update(max_recovery_delta=0, max_replay_delta=0, max_crc_delta=0, max_crc_burst=10)
        out["nvlink"] = nvl

    topo: dict[str, Any] = {}
    _put(topo, "gpu_gpu", _one([p.get("link") for p in _get(facts, "topo", "gpu_pairs") or []]))
    nearest = sorted({n.get("link") for n in _get(facts, "topo", "gpu_nearest_nic") or [] if n.get("link")})
    _put(topo, "gpu_nic", nearest)
    _put(out, "topo", topo)

    nvs: dict[str, Any] = {}
    _put(nvs, "count", _get(facts, "nvswitch", "pci", "count"))
    _put(nvs, "firmware", _one(_get(facts, "nvswitch", "firmware", "nvswitch_versions") or []))
    _put(out, "nvswitch", nvs)

    ports = _get(facts, "ib", "ibstat", "ports") or []
    active = [p for p in ports if p.get("state") == "Active"]
    if active:
        ca_type = Counter(p.get("ca_type") for p in active).most_common(1)[0][0]
        compute = [p for p in ports if p.get("ca_type") == ca_type]
        hcas = [h for h in _get(facts, "ib", "ibstat", "hcas") or [] if h.get("ca_type") == ca_type]
        ib: dict[str, Any] = {"ca_types": [ca_type]}
        _put(ib, "hca_count", len(hcas) or None)
        _put(ib, "rate", _one([p.get("rate") for p in compute]))
        layer = _one([p.get("link_layer") for p in compute])
        _put(ib, "link_layer", layer)
        _put(ib, "fw", _one([h.get("fw_version") for h in hcas]))
        # ib.psid reads the board id sysfs gives each compute HCA; mlxfwmanager's PSIDs when sysfs was not read.
        psids = sorted({d.get("board_id") for d in _get(facts, "ib", "counters", "devices") or []
                        if d.get("board_id") and d.get("hca_type") == ca_type}
                       or {d.get("psid") for d in _get(facts, "ib", "firmware", "devices") or [] if d.get("psid")})
        _put(ib, "psids", psids)
        compute_devs = {h.get("name") for h in hcas}
        _put(ib, "mtu", _one([p.get("active_mtu") for p in _get(facts, "ib", "devinfo", "ports") or [] if p.get("device") in compute_devs]))
        if layer == "InfiniBand":
            ib["sm_required"] = True
            _put(ib, "pkey", _shared_pkey(_get(facts, "ib", "counters", "ports") or []))
        if _get(facts, "ib", "mlxlink", "available"):
            ib["max_effective_ber"] = MAX_EFFECTIVE_BER
        ib.update(max_link_downed_delta=0, max_symbol_error_delta=0, max_link_integrity_delta=0, max_lost_carrier=0)
        out["ib"] = ib
    _put(out, "ofed", {"version": _get(facts, "ofed", "version")} if _get(facts, "ofed", "version") else None)
    if _get(facts, "kernel", "modules", "nvidia_peermem") is True:
        out["rdma"] = {"peermem": True}
    acs = _get(facts, "pcie", "gpu_nic_path_acs_enabled")
    if acs == []:
        out["pcie"] = {"acs_disabled": True}
    mode = _get(facts, "kernel", "cmdline", "iommu")
    if mode:
        out["iommu"] = {"modes": [mode]}
    return out
