"""The emulated nccl-tests across nodes: each launcher task is the emulator on its node, the tasks meet over loopback
and rank 0 prints the run in nccl-tests' multi-node format, its figure the bottleneck of the set.

The launcher is real (srun's task environment, or Open MPI's): the rendezvous key is the job and step, the rank and
size are the launcher's. Rank 0 listens on 127.0.0.1 (a port of its own choosing, published in the lab's directory);
every other task dials it, sends what its node can carry, and waits for rank 0 to finish, as NCCL ranks do.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import namedtuple
from pathlib import Path

from . import fabricpaths, perfmodel, render_perf
from .model import Node, compute_hcas, profile_of

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

#: How long rank 0 waits for every rank to join, and a rank for rank 0's port: a rank that never joins hangs the run
#: as NCCL's init does (the launcher's time limit, not this, ends it).
JOIN_WAIT_S = 120.0
#: NCCL's share of the HCAs' line rate in an all-reduce across nodes: the 10-node H100 run of the corpus reaches
#: busbw 316-346 GB/s at 1-16 GiB over 8 x NDR 400 (8 x 391.2 Gb/s = 391 GB/s): about 0.85.
IB_EFFICIENCY = 0.85
#: busbw (GB/s) of an all-reduce over one GB200 NVL72 rack's NVLink domain at 8 GiB: 834.57/846.82 in corpus
#: nccl-tests/blackwell-gb200-nvl72-1rack-72rank-all-reduce-nccl2.26.2-excerpt.txt (CoreWeave, 72 ranks).
DOMAIN_BUSBW = 840.0
#: A pair of nodes whose path between them is bad (slow_peers) carries this share.
BAD_PATH_FACTOR = 0.4


class Task(namedtuple("Task", "rank size key")):
    """This process's place in the launch: rank, size and the key all tasks of the step share (rank: int, size: int,
    key: str). A named tuple, not a dataclass: every task of a collective is a process of its own, and dataclasses'
    import was a fifth of its CPU."""

    __slots__ = ()


def task() -> Task | None:
    """The launcher's task, or None for a single-process run (no launcher, or one task)."""
    env = os.environ
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, size = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
        key = f"slurm-{env.get('SLURM_JOB_ID', '0')}.{env.get('SLURM_STEP_ID', '0')}"
    elif "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        rank, size = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        key = f"ompi-{env.get('OMPI_MCA_ess_base_jobid', env.get('OMPI_MCA_orte_ess_jobid', '0'))}"
    else:
        return None
    return Task(rank, size, key) if size > 1 else None


def summary(view: Node, ngpus: int) -> dict[str, Any]:
    """What one node brings to a collective: its GPUs, NVLink share, HCAs, NVLink domain and faults seen only under
    multi-node load."""
    hcas = compute_hcas(view)
    have = sum(perfmodel.hca_gbps(view, h) or 0.0 for h in hcas)
    full = sum(perfmodel.IB_BW_GBPS.get(int(h["ports"][0]["rate"]), 0.0) for h in hcas)
    fabric = view["gpus"][0]["fabric"] if view["gpus"] else {}
    clique = ([fabric.get("cluster_uuid"), fabric.get("clique_id")]
              if fabric.get("state") == "Completed" and fabric.get("cluster_uuid") else None)
    imex = view["services"].get("nvidia-imex")
    return {"host": view["hostname"], "profile": view["profile"], "model": profile_of(view)["gpu"]["model"],
            "gpus": [[g["index"], g["bus_id"][4:-2].lower()] for g in view["gpus"][:ngpus]],
            "pid": 4000000 + view["index"] * 37 % 100000,
            "intra": perfmodel.nominal(view, "all_reduce") * perfmodel.nvlink_factor(view),
            "nvlink": perfmodel.nvlink_factor(view), "ib_gbps": have, "ib_full_gbps": full,
            "multinode": float(view.get("multinode_bw", 1.0)), "slow_peers": list(view.get("slow_peers", [])),
            "clique": clique, "imex": None if imex is None else imex["active"] == "active",
            "hang": bool(view.get("collective_hang")), "fabric_dir": (view.get("fabric") or {}).get("dir")}


def fabric_paths(nodes: list[dict[str, Any]]) -> fabricpaths.Paths | None:
    """The lab fabric's paths the nodes are cabled to (None when none is: a lab without `--fabric`)."""
    return fabricpaths.load(next((n["fabric_dir"] for n in nodes if n.get("fabric_dir")), None))


def bottleneck(nodes: list[dict[str, Any]], test: str, mnnvl_enabled: bool,
               paths: fabricpaths.Paths | None = None) -> tuple[float, bool]:
    """busbw (GB/s) at the asymptote of a collective over `nodes`, and whether it ran over multi-node NVLink.

    One NVLink domain (every node in the same clique, IMEX up everywhere, NCCL_MNNVL_ENABLE not 0): the rack's
    figure at the pace of its worst tray's NVLink. Otherwise over InfiniBand: the slowest node's HCAs (their share
    under multi-node load) at the share the lab fabric's leaves and uplinks carry for this set (`paths`, when the
    lab has a fabric: fabricpaths.factor), capped by its own NVLink figure, and lower still where a pair's path is
    bad."""
    scale = perfmodel.NOMINAL[nodes[0]["profile"]][render_perf.NCCL_TESTS[test][0]] / perfmodel.NOMINAL[
        nodes[0]["profile"]]["all_reduce"]
    cliques = {json.dumps(n["clique"]) for n in nodes}
    domain = (mnnvl_enabled and len(cliques) == 1 and nodes[0]["clique"] is not None
              and all(n["imex"] for n in nodes))
    if domain:
        return DOMAIN_BUSBW * scale * min(n["nvlink"] for n in nodes) * min(n["multinode"] for n in nodes), True
    names = {n["host"] for n in nodes}
    fabric = fabricpaths.factor(paths, sorted(names))
    worst = min(min(n["intra"] * scale, n["ib_gbps"] / 8 * IB_EFFICIENCY * n["multinode"] * fabric) for n in nodes)
    if any(set(n["slow_peers"]) & (names - {n["host"]}) for n in nodes):
        worst *= BAD_PATH_FACTOR
    return worst, False


def rendezvous_dir(node_dir: Path) -> Path:
    """Where the tasks of a launch (and a perftest pair, emu.perfports) meet: beside the lab's node directories (its
    tmpfs store when it has one), so no other lab shares it; `lab up` hands it to the lab user, as whom tasks run when
    mpirun starts them over SSH."""
    return node_dir.resolve().parent / "collective"


def ensure_rendezvous_dir(node_dir: Path) -> Path:
    d = rendezvous_dir(node_dir)
    d.mkdir(exist_ok=True)  # a lab made before `lab up` created it: root's Slurm tasks may
    return d


def _wait_for(path: Path, deadline: float) -> str | None:
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
        except FileNotFoundError:
            time.sleep(0.05)
            continue
        if text.endswith("\n"):
            return text.strip()
        time.sleep(0.05)
    return None


def _readline(conn: socket.socket, deadline: float) -> bytes:
    buf = b""
    while not buf.endswith(b"\n") and time.monotonic() < deadline:
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = conn.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
    return buf


def follower(node_dir: Path, t: Task, mine: dict[str, Any]) -> bool:
    """A rank other than 0: join rank 0 and wait until it is done. False when rank 0 never answered."""
    deadline = time.monotonic() + JOIN_WAIT_S
    port = _wait_for(ensure_rendezvous_dir(node_dir) / f"{t.key}.port", deadline)
    if port is None:
        return False
    with socket.create_connection(("127.0.0.1", int(port)), timeout=JOIN_WAIT_S) as conn:
        conn.sendall(json.dumps({"rank": t.rank, **mine}).encode() + b"\n")
        # NCCL ranks stay in the collective until it completes: wait for rank 0's word (or its end)
        _readline(conn, time.monotonic() + 3600.0)
    return True


def leader(node_dir: Path, t: Task, mine: dict[str, Any]) -> tuple[list[dict[str, Any]], list[socket.socket]] | None:
    """Rank 0: publish a port, take every other rank's summary; None when one never joined in JOIN_WAIT_S."""
    d = ensure_rendezvous_dir(node_dir)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(t.size)
    tmp = d / f".{t.key}.port.{os.getpid()}"
    tmp.write_text(f"{srv.getsockname()[1]}\n")
    tmp.replace(d / f"{t.key}.port")
    ranks: dict[int, dict[str, Any]] = {0: {"rank": 0, **mine}}
    conns = []
    deadline = time.monotonic() + JOIN_WAIT_S
    try:
        while len(ranks) < t.size and time.monotonic() < deadline:
            srv.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                break
            line = _readline(conn, deadline)
            if line:
                msg = json.loads(line)
                ranks[int(msg["rank"])] = msg
                conns.append(conn)
    finally:
        srv.close()
        (d / f"{t.key}.port").unlink(missing_ok=True)
    if len(ranks) < t.size:
        for c in conns:
            c.close()
        return None
    return [ranks[r] for r in sorted(ranks)], conns


def done(conns: list[socket.socket]) -> None:
    for c in conns:
        try:
            c.sendall(b"done\n")
        except OSError:
            pass
        c.close()
