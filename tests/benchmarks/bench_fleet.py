#!/usr/bin/env python3
"""Fleet benchmark (issue 4, item 9): fabricproof against the paramiko floor, clush and ansible-playbook on a lab.

Not a test (pytest does not collect it). Needs root and openssh-server, like the lab. Run from the repo:

    python tests/benchmarks/bench_fleet.py --nodes 1000 --ansible-nodes 100 --out bench-fleet.json

It starts a lab of N emulated nodes (`fabricproof lab up`), then runs, one after the other, each as its own
process tree so its client CPU and memory are measured alone:

  fabricproof    `fabricproof validate -i INV -b BASELINE -f json=report.json`: full collection (SSH, --forks
                 64, every standard collector, raw evidence and facts written), evaluation, a JSON report
  floor          one paramiko exec per host running the same commands and doing nothing else
  clush          ClusterShell, default options, running the same commands
  ansible        ansible-playbook, command module, forks 50, pipelining, ControlPersist 600 s, on K nodes

Client CPU is every CPU second of the variant's process tree (this script is a child subreaper, so daemonized
ssh mux masters are counted too); peak RSS is sampled over the whole tree. "fleet+other CPU" is the rest of
the machine's busy time meanwhile: the lab's sshd and emulated tools (and anything else running). The emulated fleet shares the machine's cores with the client, so wall times include the
fleet's own cost; client CPU per host is the figure that transfers to real fleets.
"""

from __future__ import annotations

import argparse
import ctypes
import json
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
TARGETS = {"fabricproof_vs_floor_max": 1.25, "clush_vs_fabricproof_min": 2.0, "ansible_per_host_vs_fabricproof_min": 35.0,
           "client_cpu_ms_per_host_max": 5.0, "peak_rss_mb_max": 150.0}


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
           "machine_cpu_s": round(busy, 2), "other_cpu_s": round(busy - cpu, 2)}
    if proc.returncode not in (0,):
        row["stderr_tail"] = stderr.decode(errors="replace")[-600:]
    print(f"  {name:12s} {hosts:5d} hosts  wall {wall:8.2f} s  client CPU {cpu:7.2f} s "
          f"({row['client_cpu_ms_per_host']:6.2f} ms/host)  peak RSS {row['peak_rss_mb']:7.1f} MB  "
          f"fleet+other CPU {busy - cpu:7.2f} s  rc {proc.returncode}", flush=True)
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--ansible-nodes", type=int, default=100, help="0 skips ansible-playbook")
    ap.add_argument("--profile", default="dgx-h100")
    ap.add_argument("--forks", type=int, default=64)
    ap.add_argument("--skip", default="", help="comma-separated variants to skip: floor, clush, ansible")
    ap.add_argument("--out", type=Path, default=Path("bench-fleet.json"))
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a new one under /tmp)")
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    sys.path.insert(0, str(REPO / "cli"))
    from fabricproof.collectors import default_collectors
    from fabricproof.lab import state as lab_state

    work = args.work or Path(tempfile.mkdtemp(prefix="fabricproof-bench-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o711)  # the lab user must traverse it
    lab_dir = work / "lab"
    py = sys.executable
    print(f"lab: starting {args.nodes} {args.profile} nodes in {lab_dir}", flush=True)
    t0 = time.monotonic()
    subprocess.run([py, "-m", "fabricproof", "lab", "up", "--dir", str(lab_dir), "--nodes", str(args.nodes),
                    "--profile", args.profile], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    lab_up_s = time.monotonic() - t0
    # From here on, orphans (daemonized ssh mux masters) become our children, so their CPU is counted.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    rows: list[dict[str, Any]] = []
    try:
        lab = lab_state.load(lab_dir / "lab.json")
        inventory = lab_dir / "inventory.yml"
        argvs = [c.argv for c in default_collectors()]
        addresses = [h.address for h in lab.hosts]
        print(f"lab up in {lab_up_s:.1f} s; {len(argvs)} commands per host", flush=True)

        # Exactly what an operator runs: the CLI, evidence kept in the run directory, a JSON report written.
        rows.append(measure("fabricproof", [py, "-m", "fabricproof", "validate", "-i", str(inventory), "-b", str(BASELINE),
                                            "--run-dir", str(work / "run"), "--forks", str(args.forks), "--quiet",
                                            "-f", f"json={work / 'report.json'}"], len(addresses)))
        script = work / "commands.sh"
        script.write_text(plain_script(argvs))
        if "floor" not in skip:
            targets = work / "targets.json"
            targets.write_text(json.dumps({"addresses": addresses, "port": lab.port, "user": lab.user,
                                           "key": str(lab_dir / "keys" / "id_ed25519"),
                                           "known_hosts": str(lab_dir / "known_hosts")}))
            rows.append(measure("floor", [py, __file__, "_floor", str(targets), str(script), str(args.forks)],
                                len(addresses)))
        if "clush" not in skip:
            clush = shutil.which("clush")
            if clush is None:
                print("  clush: not installed (pip install clustershell); skipped", flush=True)
            else:
                hostfile = work / "hosts.txt"
                hostfile.write_text("\n".join(addresses) + "\n")
                ssh_opts = (f"-p {lab.port} -i {lab_dir / 'keys' / 'id_ed25519'} -o IdentitiesOnly=yes "
                            f"-o UserKnownHostsFile={lab_dir / 'known_hosts'} -o StrictHostKeyChecking=yes -o BatchMode=yes")
                rows.append(measure("clush", [clush, "--hostfile", str(hostfile), "-l", lab.user, "-o", ssh_opts,
                                              script.read_text()], len(addresses)))
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
                   "PATH": f"{Path(py).parent}:{os.environ.get('PATH', '')}"}
            argv = ["ansible-playbook", "-i", str(inventory), "--limit", f"@{limit}", "-f", "50",
                    "-e", f"@{extra}", str(playbook)]
            rows.append(measure("ansible", argv, k, env=env,
                                cleanup=lambda: (kill_mentioning(str(control)), time.sleep(0.5))))
            shutil.rmtree(control, ignore_errors=True)
    finally:
        subprocess.run([py, "-m", "fabricproof", "lab", "down", "--dir", str(lab_dir), "--purge"], cwd=REPO,
                       stdout=subprocess.DEVNULL, check=False)
        _reap_orphans()

    by = {r["variant"]: r for r in rows}
    fp = by["fabricproof"]
    summary: dict[str, Any] = {"nodes": args.nodes, "profile": args.profile, "commands_per_host": len(argvs),
                               "lab_up_s": round(lab_up_s, 1), "cpus": os.cpu_count(), "variants": rows}
    ratios: dict[str, float] = {"client_cpu_ms_per_host": fp["client_cpu_ms_per_host"], "peak_rss_mb": fp["peak_rss_mb"]}
    if "floor" in by:
        ratios["fabricproof_vs_floor"] = round(fp["wall_s"] / by["floor"]["wall_s"], 3)
    if "clush" in by:
        ratios["clush_vs_fabricproof"] = round(by["clush"]["wall_s"] / fp["wall_s"], 3)
    if "ansible" in by:
        ratios["ansible_per_host_vs_fabricproof"] = round(by["ansible"]["wall_ms_per_host"] / fp["wall_ms_per_host"], 2)
    verdicts = {
        "fabricproof_vs_floor": ratios.get("fabricproof_vs_floor", float("nan")) <= TARGETS["fabricproof_vs_floor_max"],
        "clush_vs_fabricproof": ratios.get("clush_vs_fabricproof", float("nan")) >= TARGETS["clush_vs_fabricproof_min"],
        "ansible_per_host_vs_fabricproof": ratios.get("ansible_per_host_vs_fabricproof", float("nan"))
        >= TARGETS["ansible_per_host_vs_fabricproof_min"],
        "client_cpu_ms_per_host": fp["client_cpu_ms_per_host"] <= TARGETS["client_cpu_ms_per_host_max"],
        "peak_rss_mb": fp["peak_rss_mb"] <= TARGETS["peak_rss_mb_max"],
    }
    summary.update(ratios=ratios, targets=TARGETS, met={k: v for k, v in verdicts.items() if k in ratios})
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print("\nratios and targets:")
    for key, value in ratios.items():
        met = summary["met"].get(key)
        print(f"  {key:34s} {value:>9}   {'met' if met else 'MISSED' if met is not None else ''}")
    print(f"wrote {args.out}")
    shutil.rmtree(work, ignore_errors=True) if args.work is None else None
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_floor":
        sys.exit(worker_floor(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    sys.exit(main())
