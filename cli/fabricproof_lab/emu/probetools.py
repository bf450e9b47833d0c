"""The emulated load probes: nccl-tests, nvbandwidth, perftest (a real TCP rendezvous between nodes) and dcgmi diag.

Each reads the node's fault view, sleeps its real duration scaled down (seconds, not minutes; a sleep costs no CPU)
and prints the real tool's format with figures from perfmodel. perftest's server listens for real on the node's own
127.x address and waits, bounded, for its client; the client dials the address it is given (a node's 127.0.0.1 is
the node itself, so a loopback run dials the node's own address) at the port its own lab's server took for the port
both asked for (emu.perfports: labs side by side share node addresses).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from . import faults, multinode, perfmodel, perfports, render_perf
from .model import Node, installed_driver
from .tooling import HangRequested, Result, read

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

#: Lab seconds per real second of a probe (nccl 8 B..8 GiB: ~60 s real, 1.5 s here; dcgmi -r 2: ~2 min, 3 s).
#: $FABRICPROOF_LAB_PROBE_SCALE overrides it (0: no wait), for tests that call the tools directly.
PROBE_SCALE = 1.0 / 40
PROBE_MAX_S = 15.0
#: How long an emulated perftest server waits for its client, and either side for the other's answer.
SERVER_WAIT_S = 60.0
EXCHANGE_WAIT_S = 60.0
LOOPBACK = {"127.0.0.1", "localhost", "::1", "ip6-localhost"}


def lab_seconds(real_s: float) -> float:
    """The lab's duration of a probe whose real run takes real_s."""
    try:
        scale = float(os.environ.get("FABRICPROOF_LAB_PROBE_SCALE", PROBE_SCALE))
    except ValueError:
        scale = PROBE_SCALE
    return max(0.0, min(PROBE_MAX_S, real_s * scale))


def _sleep(real_s: float) -> None:
    time.sleep(lab_seconds(real_s))


def _view(node_dir: Path) -> Node:
    return faults.view(read(node_dir))


def parse_size(text: str) -> int:
    """nccl-tests' size arguments: bytes with an optional K, M or G (powers of 1024)."""
    t = text.strip().upper()
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in "KMG" else t
    if not digits.isdigit():
        raise ValueError(text)
    return int(digits) * mult


def _opts(args: list[str], with_value: set[str]) -> tuple[dict[str, str], list[str]]:
    """Options (with '--x=v' and '-x v' forms) and positionals."""
    opts: dict[str, str] = {}
    pos: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and "=" in a:
            k, v = a.split("=", 1)
            opts[k] = v
        elif a in with_value:
            opts[a] = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        elif a.startswith("-"):
            opts[a] = ""
        else:
            pos.append(a)
        i += 1
    return opts, pos


def _no_gpu_driver(view: Node, tool: str) -> Result | None:
    if installed_driver(view) is None:
        from .outputs import not_found  # here: the command table and its renderers are no probe's usual cost

        out = not_found(tool)
        return out.stdout, out.stderr, out.rc
    return None


# ---------------------------------------------------------------------------------------------
# nccl-tests
# ---------------------------------------------------------------------------------------------

def nccl_answer(view: Node, test: str, args: list[str]) -> tuple[Result, float]:
    """`<test> -b MIN -e MAX -f FACTOR -g GPUS` (one process driving GPUS GPUs): (result, real seconds)."""
    missing = _no_gpu_driver(view, test)
    if missing:
        return missing, 0.0
    opts, _pos = _opts(args, {"-b", "-e", "-f", "-g", "-n", "-w", "-c", "-d", "-o", "-t"})
    try:
        lo = parse_size(opts.get("-b", "32M"))
        hi = parse_size(opts.get("-e", "32M"))
        factor = int(opts.get("-f", "2"))
        ngpus = int(opts.get("-g", "1"))
    except ValueError:
        return ("", f"{test}: invalid argument\n", 1), 0.0
    if ngpus > len(view["gpus"]) or ngpus < 1:
        # nccl-tests' CUDACHECK line (common.h) as a node with fewer GPUs prints it
        return (f"{view['hostname']}: Test CUDA failure common.cu:1044 'invalid device ordinal'\n"
                f" .. {view['hostname']} pid {4000000 + view['index']}: Test failure common.cu:1203\n", "", 1), 2.0
    not_ready = _fabric_not_ready(view)
    if not_ready:
        return (f"{view['hostname']}: Test CUDA failure common.cu:1044 'system not yet initialized'\n"
                f" .. {view['hostname']} pid {4000000 + view['index']}: Test failure common.cu:1203\n", "", 1), 5.0
    return (render_perf.render_nccl(view, test, lo, hi, factor, ngpus), "", 0), render_perf.nccl_real_s(hi)


def _fabric_not_ready(view: Node) -> bool:
    """CUDA refuses to start on an NVSwitch system whose GPUs have not completed fabric registration
    (cudaErrorSystemNotReady): registration In Progress, or on A100 (no registration state) a Fabric Manager
    that never came up since boot (it failed to start; one killed later leaves the fabric configured)."""
    if any(g["fabric"]["state"] not in (None, "Completed") for g in view["gpus"]):
        return True
    fm = view["services"].get("nvidia-fabricmanager")
    return (fm is not None and fm["active"] != "active" and fm.get("result") == "exit-code"
            and all(g["fabric"]["state"] is None for g in view["gpus"]))


def nccl_tests(test: str):
    def handler(node_dir: Path, args: list[str]) -> Result:
        t = multinode.task()
        if t is not None:
            return nccl_across(node_dir, test, args, t)
        result, real = nccl_answer(_view(node_dir), test, args)
        _sleep(real)
        return result

    return handler


def nccl_across(node_dir: Path, test: str, args: list[str], t: multinode.Task) -> Result:
    """One task of a launch across nodes: a node that cannot run fails as on its own (its host named); rank 0
    gathers the others and prints the run; the others print nothing, as with nccl-tests under MPI."""
    view = _view(node_dir)
    answer, real = nccl_answer(view, test, args)
    if answer[2] != 0:
        _sleep(real)
        return answer
    opts, _pos = _opts(args, {"-b", "-e", "-f", "-g", "-n", "-w", "-c", "-d", "-o", "-t"})
    ngpus = int(opts.get("-g", "1"))
    mine = multinode.summary(view, ngpus)
    if mine["hang"]:
        raise HangRequested()
    if t.rank != 0:
        if not multinode.follower(node_dir, t, mine):
            raise HangRequested()
        return "", "", 0
    met = multinode.leader(node_dir, t, mine)
    if met is None:
        raise HangRequested()  # a rank never joined: NCCL's init waits for it
    nodes, conns = met
    try:
        target, _mnnvl = multinode.bottleneck(nodes, test, os.environ.get("NCCL_MNNVL_ENABLE", "") != "0",
                                              multinode.fabric_paths(nodes))
        out = render_perf.render_nccl_nodes(test, parse_size(opts.get("-b", "32M")), parse_size(opts.get("-e", "32M")),
                                            int(opts.get("-f", "2")), ngpus, nodes, target)
        _sleep(real)
    finally:
        multinode.done(conns)
    return out, "", 0


# ---------------------------------------------------------------------------------------------
# nvbandwidth
# ---------------------------------------------------------------------------------------------

def nvbandwidth_answer(view: Node, args: list[str]) -> tuple[Result, float]:
    """`nvbandwidth [-t TESTCASE...]` (every known testcase without -t): (result, real seconds)."""
    missing = _no_gpu_driver(view, "nvbandwidth")
    if missing:
        return missing, 0.0
    cases: list[str] = []
    take = False
    for a in args:
        if a in ("-t", "--testcase"):
            take = True
        elif a.startswith("-"):
            take = False
        elif take:
            cases.append(a)
    cases = cases or list(render_perf.NVBANDWIDTH)
    for tc in cases:
        if tc not in render_perf.NVBANDWIDTH:
            return (render_perf.nvbandwidth_unknown(tc), "", 1), 0.0
    if _fabric_not_ready(view):
        # nvbandwidth's CU_ASSERT on the first CUDA call (the corpus shows its ASSERT form)
        return ("nvbandwidth Version: " + render_perf.NVBANDWIDTH_VERSION + "\n\n"
                "ASSERT: cuInit(0) == CUDA_SUCCESS: CUDA_ERROR_SYSTEM_NOT_READY\n", "", 1), 5.0
    return (render_perf.render_nvbandwidth(view, cases), "", 0), render_perf.NVBANDWIDTH_TESTCASE_REAL_S * len(cases)


def nvbandwidth(node_dir: Path, args: list[str]) -> Result:
    result, real = nvbandwidth_answer(_view(node_dir), args)
    _sleep(real)
    return result


# ---------------------------------------------------------------------------------------------
# dcgmi
# ---------------------------------------------------------------------------------------------

DCGM_DOWN = ("Error: unable to establish a connection to the specified host: localhost\n"
             "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")


def dcgmi_answer(view: Node, args: list[str]) -> tuple[Result, float]:
    """`dcgmi diag -r LEVEL [-p pcie.gpu_nvlinks_expected_up=N]`; needs the nvidia-dcgm host engine running."""
    opts, pos = _opts(args, {"-r", "-p", "-i", "-g", "-j"})
    if pos[:1] != ["diag"] or "-r" not in opts:
        return ("", "dcgmi: lab node emulates only `dcgmi diag -r LEVEL`\n", 2), 0.0
    level = int(opts["-r"]) if opts["-r"].isdigit() else 0
    if level not in render_perf.DCGM_REAL_S:
        return ("Error: Invalid run level specified.\n", "", 255), 0.0
    if view["services"].get("nvidia-dcgm", {}).get("active") != "active":
        return (DCGM_DOWN, "", 255), 0.0
    expected = None
    for param in opts.get("-p", "").split(";"):
        key, _, value = param.partition("=")
        if key.strip() == "pcie.gpu_nvlinks_expected_up" and value.strip().isdigit():
            expected = int(value)
    return (render_perf.render_dcgmi_diag(view, level, expected), "", 0), render_perf.DCGM_REAL_S[level]


def dcgmi(node_dir: Path, args: list[str]) -> Result:
    result, real = dcgmi_answer(_view(node_dir), args)
    _sleep(real)
    return result


# ---------------------------------------------------------------------------------------------
# perftest
# ---------------------------------------------------------------------------------------------

_PERFTEST_VALUES = {"-d", "--ib-dev", "-p", "--port", "-s", "--size", "-x", "--gid-index", "-n", "--iters", "-i",
                    "--ib-port", "-m", "--mtu", "-q", "--qp", "-D", "--duration", "-t", "--tx-depth", "-u",
                    "--use_cuda", "-S", "--sl", "-R"}


def _lab_address(node_dir: Path, target: str, own: str) -> str:
    """Where a client dials: the node itself for loopback names, a lab node by its host name, else the address."""
    if target in LOOPBACK:
        return own
    link = node_dir.parent / "by-name" / target
    if link.exists():
        return link.resolve().name
    return target


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    conn.sendall((json.dumps(msg) + "\n").encode())


def _recv(conn: socket.socket, timeout: float) -> dict[str, Any] | None:
    conn.settimeout(timeout)
    buf = b""
    try:
        while not buf.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                return None
            buf += chunk
    except OSError:
        return None
    try:
        return json.loads(buf.decode())
    except ValueError:
        return None


def _emit(text: str) -> None:
    """Print now: the runner watches a server's banner to know it may start the client."""
    sys.stdout.write(text)
    sys.stdout.flush()


class _Side:
    """One end of a perftest run: its node, device, GPU and what it can carry."""

    def __init__(self, view: Node, dev: dict[str, Any], gpu: dict[str, Any] | None, kind: str, size: int) -> None:
        self.view, self.dev, self.gpu, self.kind, self.size = view, dev, gpu, kind, size

    def error(self) -> tuple[str, str] | None:
        """The side's own failure as perftest prints it (stdout, stderr): a GPU buffer nobody can register for RDMA
        (its CUDA lines, then the MR error), or a port that is not Active."""
        if self.gpu is not None and not perfmodel.peermem(self.view):
            return render_perf.cuda_lines(self.view, self.gpu, self.size), render_perf.MR_FAILURE
        if perfmodel.hca_gbps(self.view, self.dev) is None:
            qpn = render_perf.qp(self.view, self.dev, 0, "x")["qpn"]
            return "", render_perf.LINK_FAILURE.format(qpn=int(qpn, 16))
        return None

    def capability(self) -> float:
        if self.gpu is not None:
            return perfmodel.gdr_gbps(self.view, self.dev, self.gpu) or 0.0
        return perfmodel.hca_gbps(self.view, self.dev) or 0.0

    def prelude(self) -> str:
        return render_perf.cuda_lines(self.view, self.gpu, self.size) if self.gpu is not None else ""


class _Args:
    """A perftest command line: device, port, size, GPU, units and the server to dial (None: be the server)."""

    def __init__(self, tool: str, view: Node, args: list[str]) -> None:
        self.kind = "bw" if tool.endswith("_bw") else "lat"
        opts, pos = _opts(args, _PERFTEST_VALUES)
        self.error: Result | None = None
        self.target = pos[-1] if pos else None
        self.gbits = "--report_gbits" in opts
        self.port = 18515
        self.side: _Side | None = None
        dev = perfmodel.hca(view, opts.get("-d") or opts.get("--ib-dev"))
        if dev is None:
            self.error = ("", " Unable to find the Infiniband/RoCE device\n", 1)
            return
        try:
            self.port = int(opts.get("-p") or opts.get("--port") or 18515)
            size = int(opts.get("-s") or opts.get("--size") or (65536 if self.kind == "bw" else 2))
        except ValueError:
            self.error = ("", f" Invalid argument for {tool}\n", 1)
            return
        gpu = None
        if "--use_cuda" in opts:
            try:
                gpu = view["gpus"][int(opts["--use_cuda"] or 0)]
            except (ValueError, IndexError):
                self.error = ("", f"No CUDA device {opts['--use_cuda']}\n", 1)
                return
        self.side = _Side(view, dev, gpu, self.kind, size)


def _outcome(run: _Args, mine: dict[str, Any], peer: dict[str, Any], figure: float, role: str) -> Result:
    """What one side prints once both know each other: its own failure, the peer's, or its report."""
    side = run.side
    assert side is not None
    own = side.error()
    if own is not None:
        return own[0], own[1], 1
    prelude = side.prelude() if role == "client" else ""
    if peer["error"]:
        return prelude, render_perf.EXCHANGE_FAILURE, 1
    return prelude + _report(side, mine, peer, figure, run.gbits, tx_depth=role == "client"), "", 0


def _transfer_real_s(side: _Side, figure: float) -> float:
    """The real run: QP setup, then 5000 iterations of the message (bw) or 1000 ping-pongs (lat)."""
    return 2.0 + (5000 * side.size * 8 / (figure * 1e9) if side.kind == "bw" and figure else 0.0)


def perftest_pair(tool: str, server_view: Node, server_args: list[str], client_view: Node,
                  client_args: list[str]) -> tuple[Result, Result]:
    """Both ends of one run without sockets or waiting (the tests' pure form of what the TCP rendezvous does)."""
    srv, cli = _Args(tool, server_view, server_args), _Args(tool, client_view, client_args)
    if srv.error or cli.error:
        return srv.error or ("", render_perf.EXCHANGE_FAILURE, 1), cli.error or ("", render_perf.EXCHANGE_FAILURE, 1)
    assert srv.side is not None and cli.side is not None
    s_hello, c_hello = _hello(srv.side, srv.port, "server"), _hello(cli.side, cli.port, "client")
    figure = _figure(srv.kind, s_hello, c_hello, srv.port)
    server = _outcome(srv, s_hello, c_hello, figure, "server")
    if server[2] == 0:
        server = (srv.side.prelude() + render_perf.BANNER + server[0], server[1], 0)
    return server, _outcome(cli, c_hello, s_hello, figure, "client")


def perftest(tool: str):
    def handler(node_dir: Path, args: list[str]) -> Result:
        """`ib_write_bw|ib_write_lat [-d DEV] [-p PORT] [--use_cuda=GPU] [-s SIZE] [-F] [--report_gbits] [SERVER]`:
        without SERVER a server on the node's own address; with it, a client of that server."""
        view = _view(node_dir)
        run = _Args(tool, view, args)
        if run.error:
            return run.error
        if run.target is not None:
            return _client(node_dir, view, run, _lab_address(node_dir, run.target, view["address"]))
        return _server(node_dir, view, run)

    return handler


def _hello(side: _Side, port: int, role: str) -> dict[str, Any]:
    return {"host": side.view["hostname"], "address": side.view["address"], "dev": side.dev["name"],
            "qp": render_perf.qp(side.view, side.dev, port, role), "cap": side.capability(),
            "error": side.error() is not None}


def _figure(kind: str, server: dict[str, Any], client: dict[str, Any], port: int) -> float:
    """A pair's figure: the weaker end's capability (a degraded HCA slows every pair it is in), with noise."""
    n = perfmodel.noise(server["host"], server["dev"], client["host"], client["dev"], port, kind)
    if kind == "lat":
        return perfmodel.IB_LAT_US * n
    return min(server["cap"], client["cap"]) * n


def _report(side: _Side, local: dict[str, Any], remote: dict[str, Any], figure: float, gbits: bool,
            tx_depth: bool) -> str:
    table = (render_perf.bw_table(side.size, figure, gbits) if side.kind == "bw"
             else render_perf.lat_table(side.size, figure))
    return render_perf.perftest_header(side.kind, side.dev, tx_depth) + \
        render_perf.perftest_addresses(local["qp"], remote["qp"]) + table


def _server(node_dir: Path, view: Node, run: _Args) -> Result:
    side = run.side
    assert side is not None
    try:
        listener = perfports.listen(node_dir, view["address"], run.port)
    except OSError:
        return "", f"Couldn't listen to port {run.port}\n Unable to init the socket connection\n", 1
    # The CUDA set-up lines come before the banner here: the perftest parser tells a server's run by the banner
    # within the 8 lines above its title.
    _emit(side.prelude() if side.gpu is not None and side.error() is None else "")
    _emit(render_perf.BANNER)
    try:  # tests shorten the wait of a server nobody dials
        wait = float(os.environ.get("FABRICPROOF_LAB_PERFTEST_WAIT_S", SERVER_WAIT_S))
    except ValueError:
        wait = SERVER_WAIT_S
    listener.sock.settimeout(wait)
    try:
        conn, _peer = listener.sock.accept()
    except OSError:
        return "", render_perf.ACCEPT_FAILURE, 1
    finally:
        listener.close()
    with conn:
        client = _recv(conn, EXCHANGE_WAIT_S)
        if client is None:
            return "", render_perf.EXCHANGE_FAILURE, 1
        mine = _hello(side, run.port, "server")
        _send(conn, mine)
        if side.error() is not None or client["error"]:
            return _outcome(run, mine, client, 0.0, "server")
        result = _recv(conn, EXCHANGE_WAIT_S + PROBE_MAX_S)
        if result is None or "figure" not in result:
            return "", render_perf.EXCHANGE_FAILURE, 1
        _send(conn, {"done": True})
        return _outcome(run, mine, client, float(result["figure"]), "server")


def _client(node_dir: Path, view: Node, run: _Args, address: str) -> Result:
    side = run.side
    assert side is not None and run.target is not None
    port = perfports.dial_port(node_dir, address, run.port)
    conn = None
    if port is not None:
        try:
            conn = socket.create_connection((address, port), timeout=EXCHANGE_WAIT_S,
                                            source_address=(view["address"], 0))
        except OSError:
            pass
    if conn is None:
        return "", render_perf.CONNECT_FAILURE.format(host=run.target, port=run.port), 1
    with conn:
        mine = _hello(side, run.port, "client")
        _send(conn, mine)
        server = _recv(conn, EXCHANGE_WAIT_S)
        if server is None:
            return "", render_perf.EXCHANGE_FAILURE, 1
        if side.error() is not None or server["error"]:
            return _outcome(run, mine, server, 0.0, "client")
        figure = _figure(side.kind, server, mine, run.port)
        _sleep(_transfer_real_s(side, figure))
        _send(conn, {"figure": figure})
        _recv(conn, EXCHANGE_WAIT_S)
    return _outcome(run, mine, server, figure, "client")
