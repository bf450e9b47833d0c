"""The probes as declared: non-default collectors that load the fabric, under /perf/<id>, with closed schemas; their
argv as pure functions of baseline values (and topo facts for the HCA<->GPU pairing); the probe config's defaults."""

from __future__ import annotations

import json

import pytest
from fabricproof.collectors import COLLECTORS, ParseError, default_collectors, probe_collectors
from fabricproof.probes import spec
from fabricproof.probes.spec import PROBES, Layout
from fabricproof.paths import schemas_dir

from collectors.contract import assert_closed_and_described
from collectors.probes.probelib import read

PROBE_IDS = ["nccl_all_reduce", "nccl_all_gather", "nccl_alltoall", "nvbandwidth", "ib_gdr_bw", "ib_pair_bw",
             "ib_pair_lat", "dcgm_diag"]
H100_TOPO = "h100-8gpu-nv18-12nic-cx7-mooncake-issue2039.txt"
A100_TOPO = "a100-8gpu-nv12-18nic-8numa-oci-bm-gpu-a100.txt"


def _topo(corpus, name: str) -> dict:
    return {"topo": COLLECTORS["topo"].parse(read(corpus, "nvidia-smi-topo", name))}


def test_every_probe_is_a_non_default_perf_collector_that_loads_the_fabric():
    assert [c.id for c in probe_collectors()] == PROBE_IDS + list(spec.GROUP_PROBES) and PROBE_IDS == list(PROBES)
    for c in probe_collectors():
        assert (c.default, c.loads_fabric, c.family, c.provides) == (False, True, "perf", f"/perf/{c.id}"), c.id
        assert c not in default_collectors()
        assert_closed_and_described(c.schema)
        assert 60 <= c.timeout_s <= 900, c.id
        if c.id in spec.GROUP_PROBES:  # one job over a group, run by its own module: no per-host argv, no parse
            assert c.argv == () and c.id not in PROBES
            with pytest.raises(ParseError, match="fabricproof collective run"):
                c.parse("# Avg bus bandwidth    : 1.0")
            continue
        assert c.corpus and c.argv[0] == PROBES[c.id].binary({})
    assert not [c.id for c in COLLECTORS.values() if c.loads_fabric and c.id not in PROBES
                and c.id not in spec.GROUP_PROBES]
    builders = {p.id: (p.layout, p.node_argv is not None, p.hca_runs is not None, p.pair_argv is not None)
                for p in PROBES.values()}
    assert all(b[1:].count(True) == 1 for b in builders.values())  # exactly the builder of its layout
    assert {p: b[0] for p, b in builders.items() if not b[1]} == {
        "ib_gdr_bw": Layout.HCA, "ib_pair_bw": Layout.PAIR, "ib_pair_lat": Layout.PAIR}


def test_no_standard_collector_loads_the_fabric():
    assert all(not c.loads_fabric for c in default_collectors())


@pytest.mark.parametrize("probe_id", [p for p in PROBE_IDS if PROBES[p].layout is Layout.NODE])
def test_a_collectors_argv_is_its_probes_argv_with_the_defaults(probe_id):
    assert PROBES[probe_id].node_argv({}) == COLLECTORS[probe_id].argv


def test_default_argv_are_the_dgx_command_lines():
    assert COLLECTORS["nccl_all_reduce"].argv == ("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8")
    assert COLLECTORS["nvbandwidth"].argv == ("nvbandwidth", "-t", "device_to_device_memcpy_read_ce")
    assert COLLECTORS["ib_gdr_bw"].argv[:1] == ("ib_write_bw",) and "--use_cuda=0" in COLLECTORS["ib_gdr_bw"].argv
    assert COLLECTORS["dcgm_diag"].argv == ("dcgmi", "diag", "-r", "2")


def test_argv_follow_the_baseline_values():
    h100 = {"gpu": {"count": 8}, "nvlink": {"links_per_gpu": 18}, "perf": {"probes": {"nccl_tests": {"max_bytes": "16G"}}}}
    assert PROBES["nccl_all_reduce"].node_argv(h100) == (
        "all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "8")
    gb200 = {"gpu": {"count": 4}}  # -g follows gpu.count: a GB200 compute tray has 4 GPUs
    assert PROBES["nccl_alltoall"].node_argv(gb200)[-2:] == ("-g", "4")
    assert PROBES["dcgm_diag"].node_argv(h100) == ("dcgmi", "diag", "-r", "2", "-p", "pcie.gpu_nvlinks_expected_up=18")
    values = {"perf": {"probes": {"nccl_tests": {"bin_dir": "/opt/nccl-tests/build/", "gpus": 2, "min_bytes": "1G"},
                                  "nvbandwidth": {"path": "/usr/local/bin/nvbandwidth",
                                                  "testcases": ["device_to_device_memcpy_write_ce"]},
                                  "dcgmi": {"level": 3}}}}
    assert PROBES["nccl_all_gather"].node_argv(values) == (
        "/opt/nccl-tests/build/all_gather_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "2")
    assert PROBES["nvbandwidth"].node_argv(values) == (
        "/usr/local/bin/nvbandwidth", "-t", "device_to_device_memcpy_write_ce")
    assert PROBES["dcgm_diag"].node_argv(values) == ("dcgmi", "diag", "-r", "3")
    assert (PROBES["dcgm_diag"].timeout_s(values), spec.dcgm_timeout_s({})) == (2700.0, COLLECTORS["dcgm_diag"].timeout_s)


def test_ib_gdr_bw_pairs_each_hca_with_its_nearest_gpu(corpus):
    runs = PROBES["ib_gdr_bw"].hca_runs({}, _topo(corpus, H100_TOPO))
    assert [(r.hca, r.gpu) for r in runs] == [("mlx5_0", 0), ("mlx5_3", 1), ("mlx5_4", 2), ("mlx5_5", 3),
                                             ("mlx5_6", 4), ("mlx5_9", 5), ("mlx5_10", 6), ("mlx5_11", 7)]
    assert runs[1].server_argv == ("ib_write_bw", "-d", "mlx5_3", "-F", "-p", "18516", "--use_cuda=1", "-s", "8388608",
                                   "--report_gbits")
    assert runs[1].client_argv == (*runs[1].server_argv, "127.0.0.1")
    assert len({r.server_argv[r.server_argv.index("-p") + 1] for r in runs}) == 8  # one rendezvous port each
    # two GPUs share each NIC on OCI's A100: the first of them drives it
    assert [(r.hca, r.gpu) for r in spec.hca_runs({}, _topo(corpus, A100_TOPO))] == [
        ("mlx5_5", 0), ("mlx5_1", 2), ("mlx5_14", 4), ("mlx5_9", 6)]


def test_ib_gdr_bw_hcas_and_gpus_from_the_baseline(corpus):
    values = {"perf": {"probes": {"perftest": {"hcas": ["mlx5_0", "mlx5_1"], "gpu_for_hca": {"mlx5_1": 7},
                                               "gid_index": 3, "bin_dir": "/usr/bin"}}}}
    runs = spec.hca_runs(values, _topo(corpus, H100_TOPO))
    assert [(r.hca, r.gpu) for r in runs] == [("mlx5_0", 0), ("mlx5_1", 7)]
    assert runs[1].server_argv[:8] == ("/usr/bin/ib_write_bw", "-d", "mlx5_1", "-F", "-x", "3", "-p", "18516")
    assert [(r.hca, r.gpu) for r in spec.hca_runs({"perf": {"probes": {"perftest": {"hcas": ["mlx5_2"]}}}})] == [
        ("mlx5_2", None)]  # no topo facts and no mapping: no --use_cuda (the check counts only GPU-memory runs)
    assert "--use_cuda" not in " ".join(spec.hca_runs({"perf": {"probes": {"perftest": {"hcas": ["x"]}}}})[0].server_argv)


def test_pair_probes_take_the_servers_address_as_one_argv_element():
    server, client = PROBES["ib_pair_bw"].pair_argv({}, "10.0.0.7", "mlx5_2")
    assert server == ("ib_write_bw", "-d", "mlx5_2", "-F", "-p", "18515", "-s", "8388608", "--report_gbits")
    assert client == (*server, "10.0.0.7")
    server, client = PROBES["ib_pair_lat"].pair_argv({}, "node007.cluster", None)
    assert (server, client[-1]) == (("ib_write_lat", "-F", "-p", "18515"), "node007.cluster")


@pytest.mark.parametrize("address", ["", "-d", "--help", "a b", "$(reboot)", "x;y", "host\n"])
def test_a_server_address_is_never_an_option_or_shell_text(address):
    with pytest.raises(ValueError, match="not a host name or address"):
        PROBES["ib_pair_bw"].pair_argv({}, address, None)


def test_a_missing_binary_names_the_path_and_the_key():
    assert spec.missing_binary("nccl_all_reduce", {}) == (
        "probe nccl_all_reduce: all_reduce_perf not found on PATH (set perf.probes.nccl_tests.bin_dir in the baseline)")
    values = {"perf": {"probes": {"dcgmi": {"path": "/opt/dcgm/bin/dcgmi"}}}}
    assert spec.missing_binary("dcgm_diag", values) == (
        "probe dcgm_diag: /opt/dcgm/bin/dcgmi not found at that path (set perf.probes.dcgmi.path in the baseline)")


def test_the_defaults_are_the_baseline_schemas_defaults():
    props = json.loads((schemas_dir() / "baseline.schema.json").read_text())["$defs"]["values"]["properties"]
    probes = props["perf"]["properties"]["probes"]["properties"]
    assert set(probes) == set(spec.DEFAULTS)
    for tool, settings in spec.DEFAULTS.items():
        assert {k: v["default"] for k, v in probes[tool]["properties"].items()} == settings, tool
