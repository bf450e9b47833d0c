"""The SSH transport against a real lab: full collection, a hung tool, sshd dying mid-run, host keys, auth."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricproof import facts as facts_mod
from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof_lab import manager
from fabricproof_lab import state as lab_state
from fabricproof.model import ExitCode
from fabricproof.runstore import RunStore
from fabricproof.transport import ErrorKind
from fabricproof.transport import knownhosts
from fabricproof.transport.ssh import SSHOptions

from .labutil import with_vars
from .test_cli import app

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
FAST = [COLLECTORS["lsmod"], COLLECTORS["cmdline"]]
GPUS = {"dgx-a100": 8, "dgx-h100": 8, "hgx-h200": 8, "gb200-nvl72": 4}


def ssh(**options) -> dict:
    """collect() settings for the SSH transport. Only the known_hosts files the inventory names: this machine's
    ~/.ssh must not sway the verdicts."""
    return {"via": "ssh", "options": SSHOptions(default_known_hosts=(), **options)}


def prepare_run_dir(path: Path) -> Path:
    return RunStore.create(path).root


def lab_host_key(lab_dir: Path) -> tuple[str, bytes]:
    keytype, b64 = (lab_dir / "keys" / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    import base64
    return keytype, base64.b64decode(b64)


def new_key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "not-the-lab", "-f", str(path)], check=True)
    return path


def known_hosts_copy(fleet_lab, tmp_path: Path, edit) -> Path:
    """A copy of the lab's known_hosts with some lines edited: the lab's own file stays as it is."""
    lines = (fleet_lab.dir / "known_hosts").read_text().splitlines(keepends=True)
    copy = tmp_path / "known_hosts"
    copy.write_text("".join(edit(lines)))
    return copy


def pointing_at(host, known_hosts: Path):
    return with_vars(host, ansible_ssh_common_args=f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes")


def test_collects_every_host_of_the_lab(fleet_lab, fleet_inventory, tmp_path):
    hosts = list(fleet_inventory.hosts.values())
    run_dir = prepare_run_dir(tmp_path / "run")
    result = collect(hosts, run_dir, **ssh(), forks=8)
    assert result.exit_code == ExitCode.OK, (result.collection_errors, result.collector_errors)
    loaded = facts_mod.load_dir(run_dir)  # every document valid against the facts schema
    assert sorted(loaded) == sorted(h.name for h in hosts)
    for host in hosts:
        doc = loaded[host.name]
        assert doc["via"] == "ssh"
        assert doc["gpu"]["count"] == GPUS[host.vars["fabricproof_lab_profile"]], host.name
        assert all(run["status"] in ("ok", "skipped") for run in doc["collectors"].values()), doc["collectors"]
        assert (run_dir / "raw" / host.name / "nvidia_smi_q.txt").stat().st_size > 1000
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and run["counts"]["collected"] == len(hosts)


def test_a_hung_tool_times_out_that_command_on_that_host_only(fleet_lab, fleet_inventory, tmp_path):
    victim = "h100-0005"
    hosts = [fleet_inventory.hosts[n] for n in ("h100-0004", victim, "gb200-0003")]
    manager.fault_inject(fleet_lab.dir, victim, "tool-hangs")
    try:
        t0 = time.monotonic()
        result = collect(hosts, prepare_run_dir(tmp_path / "run"), **ssh(),
                         collectors=[COLLECTORS["nvlink_status"], *FAST], command_timeout_s=2)
        elapsed = time.monotonic() - t0
    finally:
        manager.fault_clear(fleet_lab.dir, victim, "tool-hangs")
    assert elapsed < 20
    assert result.errors == {}
    assert result.collector_errors == {victim: {"nvlink_status": "timed out after 2 s"}}
    doc = result.facts_by_host[victim]
    assert doc["collectors"]["lsmod"]["status"] == "ok" and doc["kernel"]["modules"]["loaded"]
    assert result.facts_by_host["h100-0004"]["nvlink"]["status"]["links_active_total"] > 0


def test_a_hung_gpu_costs_one_timeout_the_other_nvidia_smi_commands_are_not_run(fleet_lab, fleet_inventory, tmp_path):
    # Issue 10.8: every nvidia-smi call waits on the hung driver; after the first one times out, the others of the
    # tool are not run (reported, with the reason), while the rest of the host collects as usual.
    victim = "h100-0006"
    nvsmi = [c for c in COLLECTORS.values() if c.default and c.lock == "nvidia-smi"]
    assert len(nvsmi) >= 5
    manager.fault_inject(fleet_lab.dir, victim, "tool-hangs")
    try:
        result = collect([fleet_inventory.hosts[victim], fleet_inventory.hosts["h100-0004"]],
                         prepare_run_dir(tmp_path / "run"), **ssh(), collectors=[*nvsmi, *FAST], command_timeout_s=2)
    finally:
        manager.fault_clear(fleet_lab.dir, victim, "tool-hangs")
    failed = result.collector_errors[victim]
    first, *others = nvsmi
    assert failed[first.id] == "timed out after 2 s"
    for c in others:
        assert failed[c.id] == (f"not run: nvidia-smi is hung on this host (`{first.command}` timed out after 2 s), "
                                f"so its other commands were not run"), c.id
    assert set(failed) == {c.id for c in nvsmi}  # lsmod and cmdline collected as usual
    assert "h100-0004" not in result.collector_errors
    meta = json.loads((result.run_dir / "raw" / victim / "meta.json").read_text())
    assert meta["nvlink_status"]["error"].startswith("not run:") and meta["nvlink_status"]["exit_code"] is None


def _refused(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def test_sshd_stopped_mid_run_makes_its_hosts_errors_and_the_run_completes(fleet_lab, fleet_inventory, transport_labs,
                                                                           tmp_path):
    lab = lab_state.load(fleet_lab.dir / "lab.json")
    doomed = lab.sshd[1]  # the second sshd serves the last 4 addresses; hosts are collected in order
    doomed_hosts = {h.name for h in lab.hosts if h.address in doomed.addresses}
    killed: list[int] = []

    def on_progress(event) -> None:
        if not killed:
            os.kill(doomed.pid, signal.SIGTERM)
            killed.append(doomed.pid)
            deadline = time.monotonic() + 5
            while not _refused(doomed.addresses[0], lab.port) and time.monotonic() < deadline:
                time.sleep(0.05)

    hosts = [fleet_inventory.hosts[h.name] for h in lab.hosts]
    run_dir = prepare_run_dir(tmp_path / "run")
    try:
        result = collect(hosts, run_dir, **ssh(retry_backoff_s=0.2), collectors=FAST, forks=2, progress=on_progress)
    finally:
        status = transport_labs.up(fleet_lab.dir, nodes=len(lab.hosts), profile=lab.profile)  # restarts the dead sshd
    assert status.running
    assert killed and set(result.errors) == doomed_hosts
    for host in doomed_hosts:
        err = result.errors[host]
        assert err.kind is ErrorKind.UNREACHABLE and "connection refused" in err.message and "3 attempts" in err.message
    assert set(result.facts_by_host) == {h.name for h in hosts} - doomed_hosts
    assert result.exit_code == ExitCode.INCOMPLETE
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and set(run["errors"]) == doomed_hosts


def test_a_changed_host_key_is_refused_naming_the_host_and_the_offered_fingerprint(fleet_lab, fleet_inventory,
                                                                                   tmp_path):
    victim, bystander = fleet_inventory.hosts["h200-0004"], fleet_inventory.hosts["h200-0005"]
    port = victim.vars["ansible_port"]
    name = knownhosts.host_id(victim.vars["ansible_host"], port)
    other = (new_key(tmp_path / "other").with_suffix(".pub")).read_text().split()[:2]
    copy = known_hosts_copy(fleet_lab, tmp_path, lambda lines: [
        f"{name} {other[0]} {other[1]}\n" if ln.startswith(name + " ") else ln for ln in lines])
    before = copy.read_text()
    offered = knownhosts.fingerprint(lab_host_key(fleet_lab.dir)[1])
    for accept_new in (False, True):  # accepting new keys never accepts a changed one
        result = collect([pointing_at(victim, copy), pointing_at(bystander, copy)],
                         prepare_run_dir(tmp_path / f"run-{accept_new}"), **ssh(accept_new_host_keys=accept_new),
                         collectors=FAST)
        err = result.errors[victim.name]
        assert err.kind is ErrorKind.HOSTKEY_MISMATCH
        assert victim.name in err.message and name in err.message and offered in err.message
        assert f"{copy}:" in err.message and "attempts" not in err.message  # names the line; never retried
        assert set(result.facts_by_host) == {bystander.name}
    assert copy.read_text() == before


def test_an_unknown_host_key_is_refused_unless_new_keys_are_accepted(fleet_lab, fleet_inventory, tmp_path):
    host = fleet_inventory.hosts["a100-0003"]
    name = knownhosts.host_id(host.vars["ansible_host"], host.vars["ansible_port"])
    copy = known_hosts_copy(fleet_lab, tmp_path, lambda lines: [ln for ln in lines if not ln.startswith(name + " ")])
    target = pointing_at(host, copy)
    offered = knownhosts.fingerprint(lab_host_key(fleet_lab.dir)[1])

    strict = collect([target], prepare_run_dir(tmp_path / "r1"), **ssh(), collectors=FAST)
    err = strict.errors[host.name]
    assert err.kind is ErrorKind.HOSTKEY_UNKNOWN and offered in err.message and "--accept-new-host-keys" in err.message

    accepted = collect([target], prepare_run_dir(tmp_path / "r2"), **ssh(accept_new_host_keys=True), collectors=FAST)
    assert accepted.exit_code == ExitCode.OK
    keytype, blob = lab_host_key(fleet_lab.dir)
    assert copy.read_text().endswith(knownhosts.line(name, keytype, blob))

    again = collect([target], prepare_run_dir(tmp_path / "r3"), **ssh(), collectors=FAST)
    assert again.exit_code == ExitCode.OK


def test_auth_failure_and_unreachable_are_told_apart(fleet_lab, fleet_inventory, tmp_path):
    good = fleet_inventory.hosts["h100-0006"]
    wrong_key = with_vars(fleet_inventory.hosts["h100-0007"], ansible_ssh_private_key_file=str(new_key(tmp_path / "k")))
    closed = with_vars(fleet_inventory.hosts["h200-0003"], ansible_port=9)  # discard: nothing listens there
    t0 = time.monotonic()
    result = collect([good, wrong_key, closed], prepare_run_dir(tmp_path / "run"), **ssh(retry_backoff_s=0.1),
                     collectors=FAST)
    assert time.monotonic() - t0 < 15
    assert set(result.facts_by_host) == {good.name}
    auth = result.errors[wrong_key.name]
    assert auth.kind is ErrorKind.AUTH and "fabricproof-lab@" in auth.message and str(tmp_path / "k") in auth.message
    assert "attempts" not in auth.message  # a refused key is not retried
    unreachable = result.errors[closed.name]
    assert unreachable.kind is ErrorKind.UNREACHABLE and "connection refused" in unreachable.message
    assert "after 3 attempts" in unreachable.message


def test_cli_collect_then_drift_shows_growing_nvlink_counters(fleet_lab, tmp_path):
    inv = fleet_lab.dir / "inventory.yml"
    victim = "h100-0003"
    args = ["collect", "-i", inv, "--limit", "dgx_h100:&h100-000[1-3]", "--collectors", "nvlink_errors,ofed_info",
            "--quiet"]
    runner = CliRunner()
    res = runner.invoke(app, [str(a) for a in [*args, "-o", tmp_path / "a"]], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "a" / "facts").iterdir()) == ["h100-0001.json", "h100-0002.json",
                                                                           "h100-0003.json"]
    manager.fault_inject(fleet_lab.dir, victim, "nvlink-errors-growing")
    try:
        res = runner.invoke(app, [str(a) for a in [*args, "-o", tmp_path / "b", "--format", "json"]],
                            catch_exceptions=False)
    finally:
        manager.fault_clear(fleet_lab.dir, victim, "nvlink-errors-growing")
    assert res.exit_code == 0
    assert json.loads(res.stdout)["counts"] == {"hosts": 3, "collected": 3, "not_collected": 0,
                                                "with_collector_errors": 0, "pending": 0}
    res = runner.invoke(app, ["drift", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "json"],
                        catch_exceptions=False)
    assert res.exit_code == 1
    changes = json.loads(res.stdout)["changes"]
    assert changes and {c["host"] for c in changes} == {victim}
    assert {c["kind"] for c in changes} == {"counter"} and all(c["delta"] > 0 for c in changes)
    assert any(c["what"].startswith("NVLink GPU 0 link 4 ") for c in changes)


JUMP_ADDRESS = "127.11.0.1"


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@pytest.fixture
def jump_host(fleet_lab, tmp_path):
    """A bastion: a second real sshd on loopback that allows TCP forwarding (the lab's own sshd does not),
    with the lab's host key, login user and authorized keys. Started as our child, stopped by PID."""
    lab = fleet_lab.lab
    keys = fleet_lab.dir / "keys"
    port = _free_port(JUMP_ADDRESS)
    config = tmp_path / "jump_sshd_config"
    config.write_text("\n".join([
        f"ListenAddress {JUMP_ADDRESS}:{port}", f"HostKey {keys / 'ssh_host_ed25519_key'}", "PidFile none",
        f"AuthorizedKeysFile {keys / 'authorized_keys'}", "StrictModes no", "PubkeyAuthentication yes",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin no",
        f"AllowUsers {lab.user}", "UsePAM no", "UseDNS no", "AllowTcpForwarding yes", "LogLevel ERROR", ""]))
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(config), "-E", str(tmp_path / "jump.log")])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((JUMP_ADDRESS, port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "jump.log").read_text()
                time.sleep(0.05)
        yield f"{lab.user}@{JUMP_ADDRESS}:{port}", knownhosts.host_id(JUMP_ADDRESS, port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_proxy_jump_reaches_the_host_through_a_bastion_with_both_keys_checked(fleet_lab, fleet_inventory, jump_host,
                                                                               tmp_path):
    spec, jump_name = jump_host
    keytype, blob = lab_host_key(fleet_lab.dir)
    copy = known_hosts_copy(fleet_lab, tmp_path, lambda lines: [*lines, knownhosts.line(jump_name, keytype, blob)])
    host = fleet_inventory.hosts["h100-0004"]
    via_jump = with_vars(host, ansible_ssh_common_args=f"-o UserKnownHostsFile={copy} -J {spec}")
    result = collect([via_jump], prepare_run_dir(tmp_path / "r1"), **ssh(), collectors=FAST)
    assert result.exit_code == ExitCode.OK, result.collection_errors
    assert result.facts_by_host[host.name]["kernel"]["modules"]["loaded"]

    # The bastion's own key is checked as strictly as the target's.
    unknown_jump = known_hosts_copy(fleet_lab, tmp_path, lambda lines: lines)
    via_unknown = with_vars(host, ansible_ssh_common_args=f"-o UserKnownHostsFile={unknown_jump} -o ProxyJump={spec}")
    result = collect([via_unknown], prepare_run_dir(tmp_path / "r2"), **ssh(), collectors=FAST)
    err = result.errors[host.name]
    assert err.kind is ErrorKind.HOSTKEY_UNKNOWN and f"jump host {spec} for {host.name}" in err.message


def test_become_runs_the_commands_through_sudo(fleet_inventory, tmp_path):
    plain = fleet_inventory.hosts["h200-0004"]
    become = with_vars(plain, ansible_become=True)
    result = collect([become], prepare_run_dir(tmp_path / "run"), **ssh(), collectors=FAST)
    assert result.exit_code == ExitCode.OK
    meta = json.loads((tmp_path / "run" / "raw" / plain.name / "meta.json").read_text())
    assert meta["lsmod"]["exit_code"] == 0
    assert result.facts_by_host[plain.name]["kernel"]["modules"]["loaded"]


def test_aes_gcm_is_negotiated_so_packets_are_not_authenticated_in_python(fleet_lab, fleet_inventory, tmp_path,
                                                                         caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="paramiko.transport")
    result = collect([fleet_inventory.hosts["h100-0006"]], prepare_run_dir(tmp_path / "run"), **ssh(), collectors=FAST)
    assert result.exit_code == ExitCode.OK
    agreed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Cipher: ")]
    assert agreed == ["Cipher: aes128-gcm@openssh.com"]


def test_a_live_validate_keeps_its_evidence_and_reports_the_owners_only(fleet_lab, tmp_path):
    from fabricproof.cli import app as root

    def mode(p: Path) -> int:
        return p.stat().st_mode & 0o777

    def validate(run_dir: Path, *extra: object):
        return CliRunner().invoke(root, [str(a) for a in (
            "validate", "-i", fleet_lab.dir / "inventory.yml", "--limit", "h100-0001",
            "-b", REPO / "inventories" / "lab" / "baseline.yaml", "--run-dir", run_dir, "-q", *extra)])

    res = validate(tmp_path / "run", "-f", f"json={tmp_path / 'report.json'}", "-f", f"html={tmp_path / 'report.html'}")
    assert res.exit_code in (0, 1), res.output
    run_dir = tmp_path / "run"
    loose = {str(p.relative_to(tmp_path)): oct(mode(p)) for p in [run_dir, *run_dir.rglob("*")]
             if mode(p) != (0o700 if p.is_dir() else 0o600)}
    assert loose == {} and (run_dir / "raw" / "h100-0001" / "meta.json").is_file()
    assert mode(tmp_path / "report.json") == mode(tmp_path / "report.html") == 0o600
    shared = validate(tmp_path / "run2", "-f", f"junit={tmp_path / 'junit.xml'}", "--output-mode", "640")
    assert shared.exit_code in (0, 1) and mode(tmp_path / "junit.xml") == 0o640


def test_validate_checks_collects_only_what_they_read_and_judges_as_the_full_run(fleet_lab, fleet_inventory, tmp_path):
    """--checks narrows the collection to collectors_read (plus the platform's, so a GB200 tray's absent Fabric
    Manager stays a skip): the checks' results are those of a full run, field for field, from fewer commands."""
    from fabricproof.cli import app as root
    from fabricproof.judging import catalog
    from fabricproof.judging.projection import collected_for

    one_of_each = {}
    for name, host in sorted(fleet_inventory.hosts.items()):
        one_of_each.setdefault(host.vars["fabricproof_lab_profile"], name)
    limit = ",".join(sorted(one_of_each.values()))
    assert any(p.startswith("gb200") for p in one_of_each), one_of_each
    chosen = "fm.service_active,fm.config_fabric_mode"

    def validate(tag: str, *extra: str) -> tuple[dict, dict]:
        res = CliRunner().invoke(root, [str(a) for a in (
            "validate", "-i", fleet_lab.dir / "inventory.yml", "--limit", limit,
            "-b", REPO / "inventories" / "lab" / "baseline.yaml", "--run-dir", tmp_path / tag, "-q",
            "-f", f"json={tmp_path / f'{tag}.json'}", *extra)])
        assert res.exit_code in (0, 1), res.output
        return (json.loads((tmp_path / f"{tag}.json").read_text()),
                json.loads((tmp_path / tag / "run.json").read_text()))

    full, full_run = validate("full")
    narrow, narrow_run = validate("narrow", "--checks", chosen)
    selected = catalog.select(catalog.load(), [chosen])
    ids = [c.id for c in collected_for(selected)]
    assert [c["id"] for c in narrow_run["collectors"]] == ids
    assert "nvidia_smi_q" in ids and len(ids) < len(full_run["collectors"]), ids
    picked = {c.id for c in selected}

    def results(report: dict) -> list[dict]:
        return [r for r in report["results"] if r["check_id"] in picked]

    assert results(narrow) == results(full) and results(full)
    for host in one_of_each.values():  # each collector it ran ended as in the full run (a skip stays a skip)
        ran = {cid: run["status"] for cid, run in
               json.loads((tmp_path / "narrow" / "facts" / f"{host}.json").read_text())["collectors"].items()}
        whole = json.loads((tmp_path / "full" / "facts" / f"{host}.json").read_text())["collectors"]
        assert sorted(ran) == sorted(ids) and ran == {cid: whole[cid]["status"] for cid in ran}, host
    gb200 = [r for r in results(narrow) if r["check_id"].startswith("fm.") and r["host"] == one_of_each["gb200-nvl72"]]
    assert gb200 and all(r["outcome"] == "skip" for r in gb200), gb200
