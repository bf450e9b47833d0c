"""How each probe covers hosts (per node, HCA or pair) and its argv as a pure function of baseline values."""

from __future__ import annotations

import copy
import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The `perf.probes` section of a baseline when it sets nothing: binaries as DGX images name them, found on PATH.
#: schemas/baseline.schema.json repeats these as "default"s (tests/probes/test_spec.py keeps them equal).
DEFAULTS: dict[str, dict[str, Any]] = {
    "nccl_tests": {"bin_dir": None, "gpus": None, "min_bytes": "8", "max_bytes": "8G", "step_factor": 2},
    "nvbandwidth": {"path": "nvbandwidth", "testcases": ["device_to_device_memcpy_read_ce"]},
    "perftest": {"bin_dir": None, "hcas": None, "gpu_for_hca": {}, "size_bytes": 8388608, "gid_index": None,
                 "port": 18515},
    "dcgmi": {"path": "dcgmi", "level": 2},
    "collective": {"launcher": "srun", "mpi": "pmix", "mpirun": "mpirun", "rsh_agent": None, "partition": None,
                   "tasks_per_node": "gpus", "test": "all_reduce_perf", "min_bytes": "512M", "max_bytes": "8G", "step_factor": 2,
                   "timeout_s": 600, "budget_s": 3600, "margin": 0.05,
                   "thresholds": {"domain": None, "domain_ib": None, "leaf": None, "cross_leaf": None, "pair": None,
                                  "all": None}},
}

# What a client may be told to dial: a host name, IPv4 or IPv6 address (with a zone); no option, no shell text.
_HOST = re.compile(r"[A-Za-z0-9_.:%\[\]-]+")


class Layout(str, enum.Enum):
    """How a probe covers a host: one run on the node, one per HCA (loopback on the node), or one per pair of hosts
    (a server on one, a client on the other)."""

    NODE = "node"
    HCA = "hca"
    PAIR = "pair"


@dataclass(frozen=True)
class HcaRun:
    """One HCA of a per-HCA probe: the GPU nearest it, and the server and client argv (the client dials the
    server on the same node)."""

    hca: str
    gpu: int | None
    server_argv: tuple[str, ...]
    client_argv: tuple[str, ...]


@dataclass(frozen=True)
class Probe:
    """A probe's layout and argv builders; its parser and fragment schema are its Collector's, and so is its
    timeout unless timeout_s scales it with the settings."""

    id: str
    layout: Layout
    tool: str  # its section under perf.probes
    binary: Callable[[Mapping[str, Any]], str]
    node_argv: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None  # Layout.NODE
    hca_runs: Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[HcaRun]] | None = None  # Layout.HCA
    pair_argv: Callable[[Mapping[str, Any], str, str | None], tuple[tuple[str, ...], tuple[str, ...]]] | None = None
    timeout_s: Callable[[Mapping[str, Any]], float] | None = None  # None: the Collector's timeout_s


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out


def config(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The probe settings for a host: its baseline values' perf.probes (schema-validated) over DEFAULTS."""
    return merge(DEFAULTS, ((values.get("perf") or {}).get("probes")) or {})


def _in_dir(bin_dir: str | None, name: str) -> str:
    return f"{bin_dir.rstrip('/')}/{name}" if bin_dir else name


def _nccl(binary_name: str) -> tuple[Callable[[Mapping[str, Any]], str], Callable[[Mapping[str, Any]], tuple[str, ...]]]:
    def binary(values: Mapping[str, Any]) -> str:
        return _in_dir(config(values)["nccl_tests"]["bin_dir"], binary_name)

    def argv(values: Mapping[str, Any]) -> tuple[str, ...]:
        """`<bin> -b <min> -e <max> -f <factor> -g <gpus>`: one process drives every GPU (gpus: the setting, else
        the baseline's gpu.count, else 8)."""
        c = config(values)["nccl_tests"]
        gpus = c["gpus"] or (values.get("gpu") or {}).get("count") or 8
        return (binary(values), "-b", str(c["min_bytes"]), "-e", str(c["max_bytes"]), "-f", str(c["step_factor"]),
                "-g", str(gpus))

    return binary, argv


def _nvbandwidth_binary(values: Mapping[str, Any]) -> str:
    return str(config(values)["nvbandwidth"]["path"])


def _nvbandwidth_argv(values: Mapping[str, Any]) -> tuple[str, ...]:
    """`nvbandwidth -t <testcase>...`: the device-to-device testcases the perf.nvbandwidth checks judge."""
    return (_nvbandwidth_binary(values), "-t", *config(values)["nvbandwidth"]["testcases"])


def _dcgmi_binary(values: Mapping[str, Any]) -> str:
    return str(config(values)["dcgmi"]["path"])


def _dcgmi_argv(values: Mapping[str, Any]) -> tuple[str, ...]:
    """`dcgmi diag -r <level>`, plus `-p pcie.gpu_nvlinks_expected_up=<N>` when the baseline pins NVLinks per GPU.
    The table output, not -j: NVIDIA documents no stable schema for the JSON."""
    level = config(values)["dcgmi"]["level"]
    links = (values.get("nvlink") or {}).get("links_per_gpu")
    extra = ("-p", f"pcie.gpu_nvlinks_expected_up={links}") if links else ()
    return (_dcgmi_binary(values), "diag", "-r", str(level), *extra)


def dcgm_timeout_s(values: Mapping[str, Any]) -> float:
    """DCGM's levels last seconds (1), about 2 minutes (2), about 15 minutes (3) and longer (4): 3x that."""
    return {1: 120.0, 2: 600.0, 3: 2700.0, 4: 7200.0}[int(config(values)["dcgmi"]["level"])]


def _perftest_binary(name: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda values: _in_dir(config(values)["perftest"]["bin_dir"], name)


def _perftest_common(values: Mapping[str, Any], hca: str | None, port: int | None) -> list[str]:
    c = config(values)["perftest"]
    args = ["-F"]
    if hca:
        args[:0] = ["-d", hca]
    if c["gid_index"] is not None:
        args += ["-x", str(c["gid_index"])]
    args += ["-p", str(port if port is not None else c["port"])]
    return args


def server_address(address: str) -> str:
    """The address a client dials, as one argv element: a host name or IP, never an option or shell text."""
    if not address or address.startswith("-") or not _HOST.fullmatch(address):
        raise ValueError(f"not a host name or address: {address!r}")
    return address


def hca_runs(values: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> list[HcaRun]:
    """ib_gdr_bw on one node: per HCA, `ib_write_bw -d <hca> --use_cuda=<gpu> -s <size> -F --report_gbits` as a
    server and the same plus 127.0.0.1 as its client, each HCA on its own port.

    HCAs: perf.probes.perftest.hcas, else the RDMA devices `nvidia-smi topo -m` names as some GPU's nearest NIC
    (facts /topo/gpu_nearest_nic). The GPU: gpu_for_hca[hca], else the first GPU whose nearest NIC it is. The runs
    go at once, so each takes its own rendezvous port: port, port + 1, ..."""
    c = config(values)["perftest"]
    nearest = [n for n in ((facts or {}).get("topo") or {}).get("gpu_nearest_nic") or [] if n.get("nic_name")]
    hcas = list(c["hcas"] or dict.fromkeys(n["nic_name"] for n in nearest))
    runs = []
    for k, hca in enumerate(hcas):
        gpu = c["gpu_for_hca"].get(hca)
        if gpu is None:
            gpu = next((int(n["gpu"].removeprefix("GPU")) for n in nearest if n["nic_name"] == hca), None)
        cuda = (f"--use_cuda={gpu}",) if gpu is not None else ()
        server = (_perftest_binary("ib_write_bw")(values), *_perftest_common(values, hca, c["port"] + k), *cuda,
                  "-s", str(c["size_bytes"]), "--report_gbits")
        runs.append(HcaRun(hca, gpu, server, (*server, "127.0.0.1")))
    return runs


def _pair(name: str, bw: bool) -> Callable[[Mapping[str, Any], str, str | None], tuple[tuple[str, ...], tuple[str, ...]]]:
    def argv(values: Mapping[str, Any], address: str, hca: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(server argv, client argv): the client's last element is the server's address."""
        c = config(values)["perftest"]
        args = (_perftest_binary(name)(values), *_perftest_common(values, hca, None))
        if bw:
            args += ("-s", str(c["size_bytes"]), "--report_gbits")
        return args, (*args, server_address(address))

    return argv


_ALL_REDUCE = _nccl("all_reduce_perf")
_ALL_GATHER = _nccl("all_gather_perf")
_ALLTOALL = _nccl("alltoall_perf")

PROBES: dict[str, Probe] = {
    p.id: p
    for p in (
        Probe("nccl_all_reduce", Layout.NODE, "nccl_tests", _ALL_REDUCE[0], node_argv=_ALL_REDUCE[1]),
        Probe("nccl_all_gather", Layout.NODE, "nccl_tests", _ALL_GATHER[0], node_argv=_ALL_GATHER[1]),
        Probe("nccl_alltoall", Layout.NODE, "nccl_tests", _ALLTOALL[0], node_argv=_ALLTOALL[1]),
        Probe("nvbandwidth", Layout.NODE, "nvbandwidth", _nvbandwidth_binary, node_argv=_nvbandwidth_argv),
        Probe("ib_gdr_bw", Layout.HCA, "perftest", _perftest_binary("ib_write_bw"), hca_runs=hca_runs),
        Probe("ib_pair_bw", Layout.PAIR, "perftest", _perftest_binary("ib_write_bw"), pair_argv=_pair("ib_write_bw", True)),
        Probe("ib_pair_lat", Layout.PAIR, "perftest", _perftest_binary("ib_write_lat"),
              pair_argv=_pair("ib_write_lat", False)),
        Probe("dcgm_diag", Layout.NODE, "dcgmi", _dcgmi_binary, node_argv=_dcgmi_argv, timeout_s=dcgm_timeout_s),
    )
}


#: Probes run over a group of hosts as one job, never host by host: not in PROBES (the per-host runner's layouts), each
#: with the module that runs it. Their collector only declares the facts they write (its parse refuses an output).
GROUP_PROBES: dict[str, str] = {
    "collective": "probes/collective.py: nccl-tests over a group through srun or mpirun, and the search "
                  "(fabricproof collective run)",
}


def missing_binary(probe_id: str, values: Mapping[str, Any]) -> str:
    """The error of a probe whose binary is not on the host: the path it looked for and the key that sets it."""
    probe = PROBES[probe_id]
    key = {"nccl_tests": "bin_dir", "perftest": "bin_dir"}.get(probe.tool, "path")
    path = probe.binary(values)
    where = "on PATH" if "/" not in path else "at that path"
    return f"probe {probe_id}: {path} not found {where} (set perf.probes.{probe.tool}.{key} in the baseline)"
