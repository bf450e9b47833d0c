"""Host keys as OpenSSH decides them: each known_hosts case is put to the machine's own `ssh` (OpenSSH 9) and to
fabricproof's SSH transport against the same lab sshd and the same known_hosts copy; both must connect or refuse
alike, and with accept-new both must record the same name (or nothing)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import subprocess
from pathlib import Path

import pytest

from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.transport import ErrorKind
from fabricproof.transport.ssh import SSHOptions

from .labutil import with_vars

pytestmark = pytest.mark.lab

HOST = "h100-0002"


def _hashed(name: str) -> str:
    salt = hashlib.sha1(name.encode()).digest()  # any 20 bytes; fixed so a failure reads the same twice
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def _keygen(path: Path, kind: str) -> str:
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "not-the-lab", "-f", str(path)], check=True)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


# name: (known_hosts lines, with {lab} the lab's real key, {ecdsa} and {ed25519} other keys, {port} {addr}
#        {hashed} the hashed [addr]:port; HostKeyAlias or None; whether OpenSSH connects strict / with accept-new)
CASES = {
    "exact [addr]:port": (["[{addr}]:{port} {lab}"], None, True, True),
    "hashed [addr]:port": (["{hashed} {lab}"], None, True, True),
    "same type, other key": (["[{addr}]:{port} {ed25519}"], None, False, False),
    "known with another key type only": (["[{addr}]:{port} {ecdsa}"], None, False, False),
    "bare name of a non-22 port, right key": (["{addr} {lab}"], None, True, True),
    "bare name of a non-22 port, other key": (["{addr} {ed25519}"], None, False, True),
    "HostKeyAlias as written": (["gpu-alias {lab}"], "gpu-alias", True, True),
    "HostKeyAlias never takes the port": (["[gpu-alias]:{port} {lab}"], "gpu-alias", False, True),
    "HostKeyAlias of a host known with another key": (["gpu-alias {ed25519}", "[{addr}]:{port} {lab}"],
                                                       "gpu-alias", False, False),
    "revoked, though also listed": (["[{addr}]:{port} {lab}", "@revoked * {lab}"], None, False, False),
    "revoked for another host only": (["[{addr}]:{port} {lab}", "@revoked 10.9.9.9 {lab}"], None, True, True),
    "only a cert-authority line": (["@cert-authority * {lab}"], None, False, True),
    "nothing known": ([], None, False, True),
}


def _known_hosts(lines: list[str], lab_dir: Path, tmp_path: Path, addr: str, port: int) -> str:
    lab_key = " ".join((lab_dir / "keys" / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    values = {"lab": lab_key, "ecdsa": _keygen(tmp_path / "ecdsa", "ecdsa"),
              "ed25519": _keygen(tmp_path / "ed25519", "ed25519"), "addr": addr, "port": port,
              "hashed": _hashed(f"[{addr}]:{port}")}
    return "".join(line.format(**values) + "\n" for line in lines)


def _openssh(lab_dir: Path, host, known: Path, alias: str | None, accept_new: bool) -> bool:
    argv = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "HashKnownHosts=no",
            "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", f"StrictHostKeyChecking={'accept-new' if accept_new else 'yes'}", "-o", "ConnectTimeout=30",
            "-i", str(lab_dir / "keys" / "id_ed25519"), "-p", str(host.vars["ansible_port"]),
            *(["-o", f"HostKeyAlias={alias}"] if alias else []),
            f"{host.vars['ansible_user']}@{host.vars['ansible_host']}", "true"]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize("accept_new", [False, True], ids=["strict", "accept-new"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fabricproof_accepts_and_refuses_host_keys_as_openssh_does(fleet_lab, fleet_inventory, tmp_path, case,
                                                                   accept_new):
    lines, alias, strict_ok, accept_new_ok = CASES[case]
    host = fleet_inventory.hosts[HOST]
    addr, port = host.vars["ansible_host"], int(host.vars["ansible_port"])
    text = _known_hosts(lines, fleet_lab.dir, tmp_path, addr, port)
    theirs, ours = tmp_path / "openssh_known_hosts", tmp_path / "our_known_hosts"
    theirs.write_text(text)
    ours.write_text(text)

    openssh = _openssh(fleet_lab.dir, host, theirs, alias, accept_new)
    args = f"-o UserKnownHostsFile={ours} -o StrictHostKeyChecking=yes" + (f" -o HostKeyAlias={alias}" if alias else "")
    result = collect([with_vars(host, ansible_ssh_common_args=args)], tmp_path / "run", via="ssh",
                     options=SSHOptions(default_known_hosts=(), accept_new_host_keys=accept_new),
                     collectors=[COLLECTORS["lsmod"]])

    assert openssh == (accept_new_ok if accept_new else strict_ok), "OpenSSH itself decided otherwise"
    assert (HOST in result.facts_by_host) == openssh, result.collection_errors
    if not openssh:
        assert result.errors[HOST].kind in (ErrorKind.HOSTKEY_MISMATCH, ErrorKind.HOSTKEY_UNKNOWN)
    # what accept-new recorded: the same line, or nothing, in both files
    assert ours.read_text().splitlines()[len(lines):] == theirs.read_text().splitlines()[len(lines):]
