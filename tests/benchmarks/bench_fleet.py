#!/usr/bin/env python3
"""Fleet benchmark (issues 4 and 13): fabricproof against the paramiko floor, clush and ansible-playbook on a lab,
at zero and at realistic host latency, with 1, 2 and N worker processes, and a 10,000-host replay.

Not a test (pytest does not collect it). Needs root and openssh-server, like the lab. Run from the repo:

    python tests/benchmarks/bench_fleet.py --nodes 1000 --ansible-nodes 100 --replay-hosts 10000 --out bench-fleet.json

It starts a lab of N emulated nodes (`fabricproof lab up`) and runs, one after the other, each as its own process
tree so its client CPU and memory are measured alone:

  (a) zero latency (the lab's tools answer in milliseconds)
  fabricproof    `fabricproof validate -i INV -b BASELINE -f json=report.json`: full collection (SSH, --forks
                 64, every standard collector, raw evidence and facts written), evaluation, a JSON report
  floor          one paramiko exec per host running the same commands and doing nothing else
  clush          ClusterShell, default options, running the same commands
  ansible        ansible-playbook, command module, forks 50, pipelining, ControlPersist 600 s, on K nodes
  (c) the same `fabricproof validate` with --workers 1, 2 and N (N: this machine's cores)
  (d) replay     collect() of --replay-base and --replay-hosts recorded hosts (the (a) run's evidence, hard-linked
                 under new names, again and again) over the replay transport, with the streaming evaluation: the
                 client's cost without SSH at 1,000 and 10,000 hosts (issue 23.2 compares those two), and what a
                 16-core control node would make of it
  (b) realistic latency (`lab up --latency realistic`: every tool sleeps what the real one takes, tools.py)
  fabricproof    the same validate; against the bound ceil(hosts/forks) x the host's longest chain
  floor-seq      the floor's one exec, commands one after another as plain sh runs them
  clush-seq      clush running them one after another (pdsh and clush run a command list in sequence)

Client CPU is every CPU second of the variant's process tree (this script is a child subreaper, so daemonized
ssh mux masters are counted too); peak RSS is sampled over the whole tree, and per process ("per worker"). "fleet+other
CPU" is the rest of the machine's busy time meanwhile: the lab's sshd and emulated tools (and anything else
running). The emulated fleet shares the machine's cores with the client, so wall times include the fleet's own
cost; client CPU per host is the figure that transfers to real fleets. --skip leaves variants out.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "inventories" / "lab" / "baseline.yaml"
PR_SET_CHILD_SUBREAPER = 36
#: Issue 13's goals: (figure, "max" or "min", bound). Measured and printed, never asserted.
TARGETS: dict[str, tuple[str, float]] = {
    "fabricproof_vs_floor": ("max", 1.15), "clush_vs_fabricproof": ("min", 2.5),
    "ansible_per_host_vs_fabricproof": ("min", 35.0), "client_cpu_ms_per_host": ("max", 20.0),
    "peak_rss_mb_per_worker": ("max", 150.0),
    "realistic_vs_bound": ("max", 1.2), "sequential_vs_fabricproof": ("min", 3.0),
    "replay_cpu_per_host_10x_vs_1x": ("max", 1.10), "replay_rss_10x_vs_1x": ("max", 1.10),
}


# ---------------------------------------------------------------------------------------- measuring


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, rss pages) for every process."""
    out: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                rest = fh.read().rpartition(b")")[2].split()
            out[int(entry)] = (int(rest[1]), int(rest[21]))
        except (OSError, ValueError, IndexError):
            continue
    return out


class TreeSampler(threading.Thread):
    """Peak summed RSS of a process tree rooted at `root` (plus orphans adopted by this subreaper)."""

    def __init__(self, root: int, interval_s: float = 0.25):
        super().__init__(daemon=True)
        self.root, self.interval_s, self.peak_bytes = root, interval_s, 0
        self.peak_process_bytes = 0  # the largest single process of the tree: RSS per worker
        self.me = os.getpid()
        self._halt = threading.Event()
        self.page = os.sysconf("SC_PAGE_SIZE")

    def run(self) -> None:
        while not self._halt.is_set():
            table = _proc_table()
            children: dict[int, list[int]] = {}
            for pid, (ppid, _) in table.items():
                children.setdefault(ppid, []).append(pid)
            # the variant's tree, plus anything reparented to us (daemonized ssh masters)
            todo = [self.root, *children.get(self.me, [])]
            seen, rss = set(), 0
            while todo:
                pid = todo.pop()
                if pid in seen or pid not in table:
                    continue
                seen.add(pid)
                rss += table[pid][1]
                self.peak_process_bytes = max(self.peak_process_bytes, table[pid][1] * self.page)
                todo.extend(children.get(pid, []))
            self.peak_bytes = max(self.peak_bytes, rss * self.page)
            self._halt.wait(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy (all cores): the lab's sshd and tools, the client, and
    anything else running. sshd's own accounting cannot be used: session processes exit without
    reaping the shell they ran, so its CPU never reaches the listener's cutime."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / _clock_ticks()


def _reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def measure(name: str, argv: list[str], hosts: int, env: dict[str, str] | None = None,
            cleanup=None) -> dict[str, Any]:
    """Run argv as a child; wall, client CPU of its whole tree, peak tree RSS, machine CPU meanwhile."""
    _reap_orphans()
    before = os.times()
    busy0 = _machine_busy_s()
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    _, stderr = proc.communicate()
    wall = time.monotonic() - t0
    if cleanup is not None:
        cleanup()
    sampler.stop()
    time.sleep(0.2)
    _reap_orphans()
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    busy = _machine_busy_s() - busy0
    row = {"variant": name, "hosts": hosts, "rc": proc.returncode, "wall_s": round(wall, 3),
           "client_cpu_s": round(cpu, 3), "client_cpu_ms_per_host": round(cpu * 1000 / hosts, 2),
           "wall_ms_per_host": round(wall * 1000 / hosts, 2), "peak_rss_mb": round(sampler.peak_bytes / 2**20, 1),
           "peak_rss_mb_per_process": round(sampler.peak_process_bytes / 2**20, 1),
           "machine_cpu_s": round(busy, 2), "other_cpu_s": round(busy - cpu, 2)}
    if proc.returncode not in (0,):
        row["stderr_tail"] = stderr.decode(errors="replace")[-600:]
    print(f"  {name:16s} {hosts:5d} hosts  wall {wall:8.2f} s  client CPU {cpu:7.2f} s "
          f"({row['client_cpu_ms_per_host']:6.2f} ms/host)  peak RSS {row['peak_rss_mb']:7.1f} MB "
          f"(largest process {row['peak_rss_mb_per_process']:6.1f} MB)  fleet+other CPU {busy - cpu:7.2f} s  "
          f"rc {proc.returncode}", flush=True)
    return row


# ---------------------------------------------------------------------------------------- workers


def worker_floor(targets_file: str, script_file: str, forks: int) -> int:
    """The floor: connect, one exec of the plain command list, read everything, close. Nothing else."""
    import paramiko

    spec = json.loads(Path(targets_file).read_text())
    script = Path(script_file).read_text()
    key = paramiko.Ed25519Key.from_private_key_file(spec["key"])
    known = paramiko.HostKeys(spec["known_hosts"])

    def one(address: str) -> int:
        client = paramiko.SSHClient()
        client._host_keys = known  # shared, read once; RejectPolicy for anything not in it
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(address, spec["port"], spec["user"], pkey=key, look_for_keys=False, allow_agent=False,
                       timeout=30, banner_timeout=60)
        try:
            _, out, err = client.exec_command(script)
            n = len(out.read()) + len(err.read())
            out.channel.recv_exit_status()
            return n
        finally:
            client.close()

    with ThreadPoolExecutor(max_workers=forks) as pool:
        total = sum(pool.map(one, spec["addresses"]))
    print(f"floor: {total} bytes", file=sys.stderr)
    return 0


def worker_replay(source: str, hosts_file: str, out_dir: str, workers: int) -> int:
    """Client cost without SSH: collect() over the replay transport (parse, evidence, facts, run store) with the
    streaming evaluation validate uses, for every host named in hosts_file (name and groups, one JSON per line)."""
    sys.path.insert(0, str(REPO / "cli"))
    from fabricproof.judging import baseline as baseline_mod
    from fabricproof.judging import catalog
    from fabricproof.collect import collect
    from fabricproof.judging.evaluate import StreamingEvaluation
    from fabricproof.model import Host
    from fabricproof.transport.replay import ReplayOptions

    hosts = [Host(d["name"], {}, tuple(d["groups"])) for d in map(json.loads, Path(hosts_file).read_text().splitlines())]
    stream = StreamingEvaluation(baseline_mod.load(BASELINE), catalog.select(catalog.load(), []),
                                 groups={h.name: h.groups for h in hosts})
    result = collect(hosts, Path(out_dir), via="replay", options=ReplayOptions(Path(source)), workers=workers,
                     sink=stream.add)
    report = stream.finish(result.collection_errors)
    print(f"replay: {len(result.collected)} hosts collected, {len(report.results)} results, "
          f"{result.workers} workers", file=sys.stderr)
    return 0 if len(result.collected) == len(hosts) else 3


def replicate(run_dir: Path, dest: Path, count: int, groups: dict[str, tuple[str, ...]]) -> Path:
    """A recorded run of `count` hosts: the hosts of run_dir's evidence, again and again under new names, their
    files hard-linked (no copy). Returns the file naming the hosts and their groups."""
    source_hosts = sorted(p.name for p in (run_dir / "raw").iterdir() if p.is_dir() and not p.name.startswith("."))
    raw = dest / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(count):
        src = source_hosts[i % len(source_hosts)]
        name = f"replay-{i:05d}"
        (raw / name).mkdir(exist_ok=True)
        for f in (run_dir / "raw" / src).iterdir():
            target = raw / name / f.name
            if not target.exists():
                os.link(f, target)
        lines.append(json.dumps({"name": name, "groups": list(groups.get(src, ()))}))
    hosts_file = dest / f"hosts-{count}.jsonl"
    hosts_file.write_text("\n".join(lines) + "\n")
    return hosts_file


# ---------------------------------------------------------------------------------------- orchestration


def plain_script(argvs: list[tuple[str, ...]]) -> str:
    return "\n".join(f"{shlex.join(a)} </dev/null" for a in argvs) + "\n"


def ansible_playbook_text() -> str:
    return """- hosts: all
  gather_facts: false
  tasks:
    - name: the same commands
      ansible.builtin.command:
        argv: "{{ item }}"
        strip_empty_ends: false
        expand_argument_vars: false
      loop: "{{ bench_commands }}"
      changed_when: false
      failed_when: false
"""


def kill_mentioning(needle: str) -> None:
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if needle.encode() in fh.read():
                        os.kill(int(entry), signal.SIGTERM)
            except OSError:
                continue


class Bench:
    """One benchmark run: the lab, its scratch directory, and the rows measured so far."""

    def __init__(self, args: argparse.Namespace, work: Path):
        self.args, self.work, self.py = args, work, sys.executable
        self.lab_dir = work / "lab"
        self.rows: list[dict[str, Any]] = []

    def lab_up(self, latency: str) -> None:
        subprocess.run([self.py, "-m", "fabricproof", "lab", "up", "--dir", str(self.lab_dir), "--nodes",
                        str(self.args.nodes), "--profile", self.args.profile, "--latency", latency],
                       check=True, cwd=REPO, stdout=subprocess.DEVNULL)

    def validate(self, name: str, tag: str, workers: int | None = None) -> dict[str, Any]:
        argv = [self.py, "-m", "fabricproof", "validate", "-i", str(self.lab_dir / "inventory.yml"), "-b", str(BASELINE),
                "--run-dir", str(self.work / f"run-{tag}"), "--forks", str(self.args.forks), "--quiet",
                "-f", f"json={self.work / f'report-{tag}.json'}"]
        if workers is not None:
            argv += ["--workers", str(workers)]
        row = measure(name, argv, self.args.nodes)
        self.rows.append(row)
        return row

    def floor(self, name: str, targets: Path, script: Path) -> None:
        self.rows.append(measure(name, [self.py, __file__, "_floor", str(targets), str(script), str(self.args.forks)],
                                 self.args.nodes))

    def clush(self, name: str, hostfile: Path, script: Path, lab: Any) -> None:
        clush = shutil.which("clush")
        if clush is None:
            print(f"  {name}: clush not installed (pip install clustershell); skipped", flush=True)
            return
        ssh_opts = (f"-p {lab.port} -i {self.lab_dir / 'keys' / 'id_ed25519'} -o IdentitiesOnly=yes "
                    f"-o UserKnownHostsFile={self.lab_dir / 'known_hosts'} -o StrictHostKeyChecking=yes -o BatchMode=yes")
        self.rows.append(measure(name, [clush, "--hostfile", str(hostfile), "-l", lab.user, "-o", ssh_opts,
                                        script.read_text()], self.args.nodes))


def _ratio(a: float | None, b: float | None, digits: int = 3) -> float | None:
    return round(a / b, digits) if a is not None and b else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--ansible-nodes", type=int, default=100, help="0 skips ansible-playbook")
    ap.add_argument("--profile", default="dgx-h100")
    ap.add_argument("--forks", type=int, default=64)
    ap.add_argument("--workers-max", type=int, default=None, help="N of the 1/2/N worker runs (default: cores)")
    ap.add_argument("--replay-hosts", type=int, default=10000, help="hosts of the big replay run (0 skips replay)")
    ap.add_argument("--replay-base", type=int, default=1000, help="hosts of the replay run the big one is compared with")
    ap.add_argument("--skip", default="", help="comma-separated variants to skip: floor, clush, ansible, workers, "
                                                "replay, latency")
    ap.add_argument("--out", type=Path, default=Path("bench-fleet.json"))
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a new one under /tmp)")
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    sys.path.insert(0, str(REPO / "cli"))
    from fabricproof import inventory as inventory_mod
    from fabricproof.collect import select_collectors
    from fabricproof.collect.shards import machine_cores
    from fabricproof_lab import state as lab_state
    from fabricproof.model import Command
    from fabricproof.transport import lanes

    work = args.work or Path(tempfile.mkdtemp(prefix="fabricproof-bench-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o711)  # the lab user must traverse it
    bench = Bench(args, work)
    cores = machine_cores()
    n_max = args.workers_max or cores
    collectors = select_collectors(None)
    commands = [Command(c.argv, c.timeout_s, c.id, c.lock, c.typical_s) for c in collectors]
    argvs = [c.argv for c in collectors]
    print(f"lab: starting {args.nodes} {args.profile} nodes in {bench.lab_dir}", flush=True)
    t0 = time.monotonic()
    bench.lab_up("off")
    lab_up_s = time.monotonic() - t0
    # From here on, orphans (daemonized ssh mux masters) become our children, so their CPU is counted.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    by: dict[str, dict[str, Any]] = {}
    try:
        lab = lab_state.load(bench.lab_dir / "lab.json")
        inventory = bench.lab_dir / "inventory.yml"
        addresses = [h.address for h in lab.hosts]
        print(f"lab up in {lab_up_s:.1f} s; {len(argvs)} commands per host; {cores} cores here", flush=True)
        script = work / "commands.sh"
        script.write_text(plain_script(argvs))
        targets = work / "targets.json"
        targets.write_text(json.dumps({"addresses": addresses, "port": lab.port, "user": lab.user,
                                       "key": str(bench.lab_dir / "keys" / "id_ed25519"),
                                       "known_hosts": str(bench.lab_dir / "known_hosts")}))
        hostfile = work / "hosts.txt"
        hostfile.write_text("\n".join(addresses) + "\n")

        print("(a) zero latency", flush=True)
        # Exactly what an operator runs: the CLI, evidence kept in the run directory, a JSON report written.
        by["fabricproof"] = bench.validate("fabricproof", "a")
        if "floor" not in skip:
            bench.floor("floor", targets, script)
        if "clush" not in skip:
            bench.clush("clush", hostfile, script, lab)
        k = min(args.ansible_nodes, len(addresses))
        if "ansible" not in skip and k > 0:
            playbook = work / "bench.yml"
            playbook.write_text(ansible_playbook_text())
            limit = work / "ansible-limit.txt"
            limit.write_text("\n".join(h.name for h in lab.hosts[:k]) + "\n")
            extra = work / "ansible-vars.json"
            extra.write_text(json.dumps({"bench_commands": [list(a) for a in argvs]}))
            control = Path(tempfile.mkdtemp(prefix="fpb-cp-"))
            env = {**os.environ, "ANSIBLE_PIPELINING": "True", "ANSIBLE_HOST_KEY_CHECKING": "True",
                   "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=600s",
                   "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control), "ANSIBLE_RETRY_FILES_ENABLED": "False",
                   "PATH": f"{Path(bench.py).parent}:{os.environ.get('PATH', '')}"}
            argv = ["ansible-playbook", "-i", str(inventory), "--limit", f"@{limit}", "-f", "50",
                    "-e", f"@{extra}", str(playbook)]
            bench.rows.append(measure("ansible", argv, k, env=env,
                                      cleanup=lambda: (kill_mentioning(str(control)), time.sleep(0.5))))
            shutil.rmtree(control, ignore_errors=True)

        if "workers" not in skip:
            print(f"(c) workers: 1, 2 and {n_max}", flush=True)
            for n in sorted({1, 2, n_max}):
                by[f"workers-{n}"] = bench.validate(f"fabricproof-w{n}", f"w{n}", workers=n)

        if "replay" not in skip and args.replay_hosts > 0:
            base = args.replay_base
            print(f"(d) replay: {base} and {args.replay_hosts} recorded hosts", flush=True)
            inv = inventory_mod.load(inventory)
            groups = {h.name: h.groups for h in inv.hosts.values()}
            source = work / "replay-src"
            for n in sorted({base, args.replay_hosts}):
                hosts_file = replicate(work / "run-a", source, n, groups)
                row = measure(f"replay-{n}", [bench.py, __file__, "_replay", str(source), str(hosts_file),
                                              str(work / f"replay-out-{n}"), str(n_max)], n)
                bench.rows.append(row)
                by[f"replay-{n}"] = row
                shutil.rmtree(work / f"replay-out-{n}", ignore_errors=True)

        if "latency" not in skip:
            print("(b) realistic latency", flush=True)
            bench.lab_up("realistic")
            by["realistic"] = bench.validate("fabricproof-real", "real")
            if "floor" not in skip:
                bench.floor("floor-seq", targets, script)
            if "clush" not in skip:
                bench.clush("clush-seq", hostfile, script, lab)
    finally:
        subprocess.run([bench.py, "-m", "fabricproof", "lab", "down", "--dir", str(bench.lab_dir), "--purge"], cwd=REPO,
                       stdout=subprocess.DEVNULL, check=False)
        _reap_orphans()

    rows = {r["variant"]: r for r in bench.rows}
    fp = by["fabricproof"]
    rounds = math.ceil(args.nodes / args.forks)
    chain_s, sum_s = lanes.longest_chain_s(commands), sum(c.typical_s for c in commands)
    ratios: dict[str, Any] = {
        "client_cpu_ms_per_host": fp["client_cpu_ms_per_host"],
        "peak_rss_mb_per_worker": fp["peak_rss_mb_per_process"],
        "fabricproof_vs_floor": _ratio(fp["wall_s"], rows.get("floor", {}).get("wall_s")),
        "clush_vs_fabricproof": _ratio(rows.get("clush", {}).get("wall_s"), fp["wall_s"]),
        "ansible_per_host_vs_fabricproof": _ratio(rows.get("ansible", {}).get("wall_ms_per_host"),
                                                  fp["wall_ms_per_host"], 2),
    }
    if "realistic" in by:
        real = by["realistic"]
        bound = rounds * chain_s
        ratios.update({
            "host_longest_chain_s": round(chain_s, 2), "host_commands_in_sequence_s": round(sum_s, 2),
            "bound_s": round(bound, 1), "realistic_vs_bound": _ratio(real["wall_s"], bound),
            "sequential_vs_fabricproof": _ratio(rows.get("clush-seq", rows.get("floor-seq", {})).get("wall_s"),
                                                real["wall_s"]),
            "floor_seq_vs_fabricproof": _ratio(rows.get("floor-seq", {}).get("wall_s"), real["wall_s"]),
            "clush_seq_vs_fabricproof": _ratio(rows.get("clush-seq", {}).get("wall_s"), real["wall_s"]),
        })
    for n in sorted({1, 2, n_max}):
        if f"workers-{n}" in by:
            w = by[f"workers-{n}"]
            ratios[f"workers_{n}"] = {"wall_s": w["wall_s"], "client_cpu_ms_per_host": w["client_cpu_ms_per_host"],
                                      "peak_rss_mb": w["peak_rss_mb"], "peak_rss_mb_per_worker": w["peak_rss_mb_per_process"]}
    small, big = by.get(f"replay-{args.replay_base}"), by.get(f"replay-{args.replay_hosts}")
    if small and big:
        per_host_s = big["client_cpu_s"] / big["hosts"]
        ratios.update({
            "replay_cpu_per_host_10x_vs_1x": _ratio(big["client_cpu_ms_per_host"], small["client_cpu_ms_per_host"]),
            "replay_rss_10x_vs_1x": _ratio(big["peak_rss_mb_per_process"], small["peak_rss_mb_per_process"]),
            "replay_client_cpu_ms_per_host": big["client_cpu_ms_per_host"],
            # A control node's cores all busy with workers (--workers 16): hosts the client can judge per second.
            "projection_16_cores_hosts_per_s_replay": round(16 / per_host_s, 1),
            "projection_16_cores_s_for_replay_hosts": round(big["hosts"] * per_host_s / 16, 1),
            "projection_16_cores_hosts_per_s_ssh": round(16 / (fp["client_cpu_ms_per_host"] / 1000), 1),
        })
    met = {}
    for key, (kind, bound) in TARGETS.items():
        value = ratios.get(key)
        if isinstance(value, (int, float)):
            met[key] = value <= bound if kind == "max" else value >= bound
    summary: dict[str, Any] = {"nodes": args.nodes, "profile": args.profile, "forks": args.forks,
                               "commands_per_host": len(argvs), "lab_up_s": round(lab_up_s, 1), "cpus": cores,
                               "variants": bench.rows, "ratios": ratios,
                               "targets": {k: f"{'<=' if kind == 'max' else '>='} {b}" for k, (kind, b) in TARGETS.items()},
                               "met": met}
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print("\nfigures, ratios and targets:")
    for key, value in ratios.items():
        target = TARGETS.get(key)
        verdict = "" if key not in met else ("met" if met[key] else "MISSED")
        goal = f"{'<=' if target[0] == 'max' else '>='} {target[1]}" if target else ""
        print(f"  {key:40s} {json.dumps(value):>12}   {goal:8s} {verdict}")
    print(f"wrote {args.out}")
    shutil.rmtree(work, ignore_errors=True) if args.work is None else None
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_floor":
        sys.exit(worker_floor(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    if len(sys.argv) > 1 and sys.argv[1] == "_replay":
        sys.exit(worker_replay(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    sys.exit(main())
