"""The emulated load probes: every output parses with the real parser into the node model's figures, each fault
fails exactly its perf checks (catches_probes) on its node, and the idle state reads back (pure, no sshd)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from functools import cache
from pathlib import Path

import pytest
from fabricproof.judging import baseline as baselines
from fabricproof import facts
from fabricproof.judging import catalog, evaluate
from fabricproof.probes import spec
from fabricproof.collectors.probes.dcgmi import parse_dcgmi_diag
from fabricproof.collectors.probes.nccl_tests import parse_nccl_tests
from fabricproof.collectors.probes.nvbandwidth import parse_nvbandwidth
from fabricproof.collectors.probes.perftest import parse_perftest
from fabricproof.collectors.probes.text import join_targets
from fabricproof_lab.emu import faults, model, perfmodel, probetools, render_perf, render_sys
from fabricproof_lab.emu.faults import FAULTS
from fabricproof_lab.emu.faults.perf import DEGRADED_GPU
from fabricproof.model import CommandResult, Outcome

from .lablib import command_results

REPO = Path(__file__).resolve().parents[2]
PROFILES = ("dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72")
D2D = "device_to_device_memcpy_read_ce"


@pytest.fixture(scope="module")
def perf_checks() -> list:
    return [c for c in catalog.load(REPO / "checks") if c.id.startswith("perf.")]


def _node(profile: str, index: int) -> dict:
    rack = 1 if profile == "gb200-nvl72" else None
    return model.new_node(profile, index, rack, f"n-{index:04d}", f"127.10.0.{index + 1}")


@cache
def _baseline(profile: str) -> baselines.Baseline:
    """The profile's example baseline, read and checked once for the module (twice a fault before: a parse and a
    schema check of the same file each time; the judging and the probes' argv only read it)."""
    return baselines.load(REPO / "inventories" / profile / "baseline.yaml")


def _values(profile: str) -> dict:
    return _baseline(profile).for_groups([])


def _probe_results(view: dict, peer: dict, values: dict, collected: dict) -> dict[str, CommandResult]:
    """What a runner would get back from every probe of spec.PROBES on this node (pairs with `peer` as the
    server), computed in-process by the emulated tools."""
    out: dict[str, CommandResult] = {}
    for pid, probe in spec.PROBES.items():
        if probe.layout is spec.Layout.NODE:
            argv = probe.node_argv(values)
            if pid.startswith("nccl_"):
                (so, se, rc), _real = probetools.nccl_answer(view, argv[0], list(argv[1:]))
            elif pid == "nvbandwidth":
                (so, se, rc), _real = probetools.nvbandwidth_answer(view, list(argv[1:]))
            else:
                (so, se, rc), _real = probetools.dcgmi_answer(view, list(argv[1:]))
            out[pid] = CommandResult(argv, so, se, rc)
        elif probe.layout is spec.Layout.HCA:
            texts, worst = {}, 0
            for run in probe.hca_runs(values, collected):
                _srv, (so, se, rc) = probetools.perftest_pair("ib_write_bw", view, list(run.server_argv[1:]), view,
                                                              list(run.client_argv[1:]))
                texts[run.hca], worst = so + se, max(worst, rc)
            out[pid] = CommandResult(("ib_write_bw",), join_targets(texts), "", 0)
        else:
            server_argv, client_argv = probe.pair_argv(values, peer["address"], None)
            tool = server_argv[0]
            _srv, (so, se, rc) = probetools.perftest_pair(tool, peer, list(server_argv[1:]), view,
                                                          list(client_argv[1:]))
            out[pid] = CommandResult(client_argv, join_targets({peer["hostname"]: so + se}), "", 0)
    return out


def _facts(view: dict, peer: dict, profile: str) -> dict:
    results = command_results(view)
    collected = facts.build("b", results, via="replay")
    return facts.build("b", {**results, **_probe_results(view, peer, _values(profile), collected)}, via="replay")


def _not_passing(profile: str, checks: list, doc: dict) -> set[str]:
    report = evaluate.evaluate({"b": doc}, _baseline(profile), checks, groups={})
    return {r.check_id for r in report.results if r.outcome in (Outcome.FAIL, Outcome.ERROR, Outcome.UNKNOWN)}


@pytest.mark.parametrize("profile", PROFILES)
def test_a_healthy_node_passes_every_probe_check_of_its_baseline(profile: str, perf_checks: list) -> None:
    view, peer = _node(profile, 1), _node(profile, 2)
    doc = _facts(view, peer, profile)
    assert _not_passing(profile, perf_checks, doc) == set()
    perf = doc["perf"]
    nominal = perfmodel.NOMINAL[profile]
    assert perf["nccl_all_reduce"]["busbw_gbps"] == pytest.approx(nominal["all_reduce"], rel=0.02)
    assert perf["nccl_all_reduce"]["data_errors"] == 0 and perf["nccl_all_reduce"]["gpus"] == len(view["gpus"])
    summary = perf["nvbandwidth"]["testcases"][D2D]["summary"]
    assert summary["median"] == pytest.approx(nominal["d2d"], rel=0.01) and summary["min_over_median_pct"] > 98
    rate = view["hcas"][0]["ports"][0]["rate"]
    gdr = perf["ib_gdr_bw"]["targets"]
    assert gdr and all(t["gpu_memory"] for t in gdr.values())
    assert all(t["bw_average_gbps"] == pytest.approx(perfmodel.IB_BW_GBPS[rate], rel=0.015) for t in gdr.values())
    pair = perf["ib_pair_bw"]["targets"][peer["hostname"]]
    assert pair["bw_average_gbps"] == pytest.approx(perfmodel.IB_BW_GBPS[rate], rel=0.015)
    assert perf["ib_pair_lat"]["targets"][peer["hostname"]]["t_typical_us"] == pytest.approx(1.87, rel=0.015)
    assert perf["dcgm_diag"]["passed"] is True


@pytest.mark.parametrize("profile", PROFILES)
def test_each_fault_fails_exactly_its_probe_checks(profile: str, perf_checks: list) -> None:
    peer = _node(profile, 2)
    wrong = {}
    for name, fault in sorted(FAULTS.items()):
        if profile not in fault.profiles or fault.kind == "trigger" or name == "tool-hangs":
            continue
        node = _node(profile, 1)
        faults.inject(node, name)
        got = _not_passing(profile, perf_checks, _facts(faults.view(node), peer, profile))
        want = set(fault.catches_probes_for(profile))
        if got != want:
            wrong[name] = {"missed": sorted(want - got), "unexpected": sorted(got - want)}
    assert not wrong, wrong


def test_a_degraded_gpu_lowers_its_own_pairs_and_the_busbw() -> None:
    node = _node("dgx-h100", 1)
    healthy = parse_nvbandwidth(render_perf.render_nvbandwidth(node, [D2D]))["testcases"][D2D]
    faults.inject(node, "nvlink-degraded")
    view = faults.view(node)
    tc = parse_nvbandwidth(render_perf.render_nvbandwidth(view, [D2D]))["testcases"][D2D]
    gpu = DEGRADED_GPU
    m = tc["matrices"][0]["values"]
    for i in range(8):
        for j in range(8):
            if i == j:
                continue
            want = 0.5 if gpu in (i, j) else 1.0
            assert m[i][j] == pytest.approx(healthy["matrices"][0]["values"][i][j] * want, rel=1e-3), (i, j)
    assert gpu in (tc["summary"]["min_pair"]["row"], tc["summary"]["min_pair"]["column"])
    busbw = parse_nccl_tests(render_perf.render_nccl(view, "all_reduce_perf", 8, 8 << 30, 2, 8))["busbw_gbps"]
    assert busbw == pytest.approx(perfmodel.NOMINAL["dgx-h100"]["all_reduce"] * 0.5, rel=0.02)


def test_inactive_links_scale_busbw_by_the_worst_gpu_and_fail_dcgm_pcie() -> None:
    node = _node("dgx-h100", 1)
    faults.inject(node, "nvlink-inactive")  # GPU 1: 16 of 18 links
    view = faults.view(node)
    busbw = parse_nccl_tests(render_perf.render_nccl(view, "all_reduce_perf", 8, 8 << 30, 2, 8))["busbw_gbps"]
    assert busbw == pytest.approx(perfmodel.NOMINAL["dgx-h100"]["all_reduce"] * 16 / 18, rel=0.02)
    diag = parse_dcgmi_diag(render_perf.render_dcgmi_diag(view, 2, 18))
    assert diag["failed_tests"] == ["PCIe"]
    pcie = next(t for t in diag["tests"] if t["name"] == "PCIe")
    assert pcie["messages"] == ["warning: GPU 1's NvLink link 3 is currently down",
                                "warning: GPU 1's NvLink link 7 is currently down"]


def test_peermem_missing_fails_use_cuda_with_the_real_mr_error() -> None:
    node = _node("dgx-h100", 1)
    faults.inject(node, "peermem-missing")
    view = faults.view(node)
    server, (so, se, rc) = probetools.perftest_pair("ib_write_bw", view, ["-d", "mlx5_0", "--use_cuda=0", "-F"], view,
                                                    ["-d", "mlx5_0", "--use_cuda=0", "-F", "127.0.0.1"])
    assert rc == 1 and server[2] == 1
    assert "Couldn't allocate MR with error=14" in se and "CUDA_MEM_DEVICE" in so
    with pytest.raises(Exception, match="Couldn't allocate MR.*nvidia-peermem not loaded"):
        parse_perftest(so + se)
    # host memory is unaffected: a pair run without --use_cuda still works
    _srv, (so, _se, rc) = probetools.perftest_pair("ib_write_bw", view, ["-F"], view, ["-F", "127.0.0.1"])
    assert rc == 0 and parse_perftest(so)["targets"]["mlx5_0"]["bw_average_gbps"] > 380


@pytest.mark.parametrize(("fault", "hca", "gpu", "share"), [
    ("ib-rate-degraded", "mlx5_1", 1, 0.5),  # 200 on a 400 fabric
    ("acs-enabled", "mlx5_0", 0, 0.5),  # through the root complex
    ("pcie-x8", "mlx5_6", 6, 224 * 0.97 / 391.2),  # the GPU's x8 Gen5 link caps it
    ("hca-degraded", "mlx5_0", 0, 0.5),
])
def test_each_rdma_fault_lowers_only_its_hca(fault: str, hca: str, gpu: int, share: float) -> None:
    node = _node("dgx-h100", 1)
    faults.inject(node, fault)
    view = faults.view(node)
    for k in range(8):
        args = ["-d", f"mlx5_{k}", "-p", str(18515 + k), f"--use_cuda={k}", "-s", "8388608", "-F", "--report_gbits"]
        _srv, (so, _se, _rc) = probetools.perftest_pair("ib_write_bw", view, args, view, [*args, "127.0.0.1"])
        got = parse_perftest(so)["targets"][f"mlx5_{k}"]["bw_average_gbps"]
        want = 391.2 * (share if f"mlx5_{k}" == hca and k == gpu else 1.0)
        assert got == pytest.approx(want, rel=0.015), (fault, k)


def test_a_degraded_hca_is_localised_by_pairing_16_nodes() -> None:
    """Ring pairings over three rounds: only the node with the degraded HCA is slow in every pair it is in."""
    views = [_node("dgx-h100", i) for i in range(16)]
    faults.inject(views[7], "hca-degraded")
    views = [faults.view(v) for v in views]
    slow: dict[int, list[bool]] = {i: [] for i in range(16)}
    for step in (1, 2, 3):
        for i in range(16):
            j = (i + step) % 16
            _srv, (so, _se, _rc) = probetools.perftest_pair("ib_write_bw", views[j], ["-F", "-s", "8388608"], views[i],
                                                           ["-F", "-s", "8388608", views[j]["address"]])
            bw = parse_perftest(so)["targets"]["mlx5_0"]["bw_average_gbps"]
            for n in (i, j):
                slow[n].append(bw < 380)
    assert [n for n, s in slow.items() if all(s)] == [7]
    assert all(sum(s) == (1 if n in (4, 5, 6, 8, 9, 10) else 0) for n, s in slow.items() if n != 7)  # their pair with 7


def test_idle_state_lists_nothing_until_a_job_runs() -> None:
    node = _node("dgx-h100", 1)
    fields = ["pid", "process_name", "used_memory"]
    assert render_perf.render_compute_apps(node, fields, header=False, units=True) == ""
    assert render_perf.render_compute_apps(node, fields, header=True, units=True) == \
        "pid, process_name, used_gpu_memory [MiB]\n"
    assert render_perf.render_listpids(node, None) == ("", "No job steps exist on this node.\n", 1)
    faults.inject(node, "gpu-busy")
    faults.inject(node, "slurm-job")
    view = faults.view(node)
    rows = render_perf.render_compute_apps(view, fields, header=False, units=True).splitlines()
    mem = int(model.PROFILES["dgx-h100"]["gpu"]["memory_mib"] * 0.87)
    assert len(rows) == 8 and rows[0] == f"12345, /usr/bin/python3, {mem} MiB"
    out, err, rc = render_perf.render_listpids(view, None)
    lines = out.splitlines()
    assert rc == 0 and err == "" and lines[0].split() == ["PID", "JOBID", "STEPID", "LOCALID", "GLOBALID"]
    assert lines[1].split() == ["23010", "4242", "0", "0", "0"] and len(lines) == 10
    assert render_perf.render_listpids(view, "4242.0")[2] == 0 and render_perf.render_listpids(view, "99")[2] == 1
    assert "   State=ALLOCATED " in render_sys.render_scontrol_node(view)
    faults.clear(node)
    assert render_perf.render_compute_apps(faults.view(node), fields, header=False, units=True) == ""


def test_probe_time_is_the_real_duration_scaled_down() -> None:
    old = os.environ.pop("FABRICPROOF_LAB_PROBE_SCALE", None)
    try:
        assert probetools.lab_seconds(render_perf.nccl_real_s(8 << 30)) == pytest.approx(1.5)
        assert probetools.lab_seconds(render_perf.DCGM_REAL_S[2]) == pytest.approx(3.0)
        assert probetools.lab_seconds(render_perf.DCGM_REAL_S[4]) == probetools.PROBE_MAX_S
    finally:
        if old is not None:
            os.environ["FABRICPROOF_LAB_PROBE_SCALE"] = old


# ---------------------------------------------------------------------------------------------
# through the installed tools (subprocesses as the lab user would run them; perftest over real TCP)
# ---------------------------------------------------------------------------------------------

def test_every_probe_is_an_installed_lab_tool(lab) -> None:
    from fabricproof.collectors import COLLECTORS

    probes = {c.argv[0] for c in COLLECTORS.values() if c.loads_fabric and c.argv}  # a group probe has none
    probes |= {p.binary({}) for p in spec.PROBES.values()}
    assert probes == {"all_reduce_perf", "all_gather_perf", "alltoall_perf", "nvbandwidth", "ib_write_bw",
                      "ib_write_lat", "dcgmi"}
    assert all((lab / "bin" / name).is_file() for name in probes)


def test_installed_tools_answer_the_probe_argv(make_node) -> None:
    node = make_node("dgx-h100")
    values = _values("dgx-h100")
    t0 = time.monotonic()
    run = node.run(*spec.PROBES["nccl_all_reduce"].node_argv(values), timeout=60)
    took = time.monotonic() - t0
    assert run.returncode == 0, run.stderr
    assert parse_nccl_tests(run.stdout)["busbw_size_bytes"] == 16 << 30
    assert took >= probetools.lab_seconds(render_perf.nccl_real_s(16 << 30)) * 0.9  # slept, at least its lab time
    run = node.run(*spec.PROBES["nvbandwidth"].node_argv(values), timeout=60)
    assert run.returncode == 0 and parse_nvbandwidth(run.stdout)["testcases"][D2D]["summary"]["cells"] == 56
    run = node.run(*spec.PROBES["dcgm_diag"].node_argv(values), timeout=60)
    assert run.returncode == 0 and parse_dcgmi_diag(run.stdout)["passed"] is True
    apps = node.run("nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader")
    assert (apps.returncode, apps.stdout) == (0, "")
    lp = node.run("scontrol", "listpids")
    assert (lp.returncode, lp.stdout, lp.stderr) == (1, "", "No job steps exist on this node.\n")


def test_installed_perftest_rendezvous_over_tcp_and_a_server_nobody_dials(make_node) -> None:
    a, b = make_node("dgx-h100"), make_node("dgx-h100")
    server_argv, client_argv = spec.PROBES["ib_pair_bw"].pair_argv(_values("dgx-h100"), a.address, None)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(srv=a.run(*server_argv, timeout=90)))
    thread.start()
    deadline = time.monotonic() + 30
    client = None
    while time.monotonic() < deadline:  # the client may dial before the server listens: try again, as a runner would
        client = b.run(*client_argv, timeout=90)
        if "Couldn't connect" not in client.stderr:
            break
        time.sleep(0.2)
    thread.join(120)
    assert client is not None and client.returncode == 0, client.stderr
    srv = result["srv"]
    assert srv.returncode == 0, srv.stderr
    s, c = parse_perftest(srv.stdout)["targets"]["mlx5_0"], parse_perftest(client.stdout)["targets"]["mlx5_0"]
    assert s["runs"][0]["side"] == "server" and c["runs"][0]["side"] == "client"
    assert s["bw_average_gbps"] == c["bw_average_gbps"] == pytest.approx(391.2, rel=0.015)
    # lids cross over: each side's remote is the other's local
    assert s["runs"][0]["remote_lid"] == c["runs"][0]["local_lid"] != c["runs"][0]["remote_lid"]
    # a server nobody dials gives up (bounded) with perftest's accept() failure
    env = {**a.env(), "FABRICPROOF_LAB_PERFTEST_WAIT_S": "1"}
    nobody = subprocess.run([*server_argv[:-1], "-p", "18999", "--report_gbits"], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert nobody.returncode == 1 and "Waiting for client to connect" in nobody.stdout
    assert nobody.stderr.endswith("accept() failed\n Unable to init the socket connection\n")
    # and a client with no server says so the way perftest does
    lonely = b.run(*client_argv[:-1], "-p", "18999", a.address, timeout=60)
    assert lonely.returncode == 1 and lonely.stderr.startswith(f"Couldn't connect to {a.address}:18999")


def _listening(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """A perftest server started in the background, returned once it printed its banner (it listens)."""
    srv = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL)
    seen = ""
    while "Waiting for client to connect" not in seen:  # bounded: the server gives up after its wait and closes
        line = srv.stdout.readline()
        if not line:
            out, err = srv.communicate(timeout=90)
            raise AssertionError(f"the server did not listen: {seen + out}{err}")
        seen += line
    return srv


def test_perftest_of_two_labs_side_by_side_never_meets_the_other_labs(tmp_path, lab, make_node) -> None:
    """Labs side by side use the same node addresses (127.10.0.x; they differ by their sshd's port): a lab's client
    never meets another lab's server on the same address and port, and both labs' servers listen there at once."""
    from fabricproof_lab.emu import api

    a_srv, a_cli = make_node("dgx-h100"), make_node("dgx-h100")
    other = tmp_path / "other-lab"
    api.install(other)
    for address, index in ((a_srv.address, 11), (a_cli.address, 12)):
        api.create_node(other, address, "dgx-h100", index, None, f"h100-{index:04d}")
    b_env = {**a_srv.env(), "PATH": f"{other}/bin:/usr/bin:/bin"}
    b_srv = {**b_env, "FABRICPROOF_LAB_NODE": str(api.node_path(other, a_srv.address))}
    b_cli = {**b_env, "FABRICPROOF_LAB_NODE": str(api.node_path(other, a_cli.address))}
    server_argv, client_argv = spec.PROBES["ib_pair_bw"].pair_argv(_values("dgx-h100"), a_srv.address, None)

    servers = [_listening(server_argv, b_srv)]
    try:
        # only the other lab listens at the address and port: this lab's client finds nobody, as on real hosts
        alone = a_cli.run(*client_argv, timeout=90)
        assert alone.returncode == 1 and alone.stderr.startswith(f"Couldn't connect to {a_srv.address}:18515"), alone
        servers.append(_listening(server_argv, a_srv.env()))
        # within one lab a second server on the same address and port cannot listen, as perftest's bind fails
        second = a_srv.run(*server_argv, timeout=90)
        assert (second.returncode, second.stderr) == (1, "Couldn't listen to port 18515\n Unable to init the socket "
                                                         "connection\n"), second
        clients = [subprocess.run(client_argv, env=env, capture_output=True, text=True, timeout=90, check=False)
                   for env in (b_cli, a_cli.env())]
        outs = [s.communicate(timeout=90) for s in servers]
    finally:
        for s in servers:
            if s.poll() is None:
                s.kill()
                s.communicate()
    for (out, err), srv, client in zip(outs, servers, clients):
        assert srv.returncode == 0 and client.returncode == 0, (err, client.stderr)
        s, c = parse_perftest(out)["targets"]["mlx5_0"]["runs"][0], parse_perftest(client.stdout)["targets"]["mlx5_0"]
        assert s["remote_lid"] == c["runs"][0]["local_lid"] and s["local_lid"] == c["runs"][0]["remote_lid"]
    lids = [parse_perftest(out)["targets"]["mlx5_0"]["runs"][0]["local_lid"] for out, _err in outs]
    assert lids[0] != lids[1]  # the two servers are the two labs' nodes
    # a server killed while it listens leaves no port its lab's clients would dial
    killed = _listening([*server_argv[:-1], "-p", "18600", "--report_gbits"], a_srv.env())
    killed.kill()
    killed.communicate(timeout=90)
    late = a_cli.run(*client_argv[:-1], "-p", "18600", a_srv.address, timeout=90)
    assert late.returncode == 1 and late.stderr.startswith(f"Couldn't connect to {a_srv.address}:18600"), late
