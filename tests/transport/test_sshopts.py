"""Inventory host vars to SSH connection settings, in Ansible's precedence (pure)."""

from __future__ import annotations

import pytest

from fabricproof.transport.knownhosts import SYSTEM_FILES, USER_FILES
from fabricproof.transport.sshopts import Hop, SettingsError, parse_jumps, target

LAB_VARS = {
    "ansible_host": "127.10.0.3",
    "ansible_port": 2222,
    "ansible_user": "fabricproof-lab",
    "ansible_ssh_private_key_file": "/lab/keys/id_ed25519",
    "ansible_ssh_common_args": "-o UserKnownHostsFile=/lab/known_hosts -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes",
}


def test_lab_inventory_vars():
    t = target("h100-0002", LAB_VARS)
    assert (t.hostname, t.port, t.user) == ("127.10.0.3", 2222, "fabricproof-lab")
    assert t.key_files == ("/lab/keys/id_ed25519",)
    # system, user and the inventory's file are all consulted; new keys go to the inventory's file
    assert t.known_hosts_files == (*SYSTEM_FILES, *USER_FILES, "/lab/known_hosts")
    assert t.new_keys_file == "/lab/known_hosts"
    assert t.jumps == () and t.become == () and t.password is None


def test_defaults_without_vars():
    t = target("node7", {}, default_user="ops")
    assert (t.hostname, t.port, t.user) == ("node7", 22, "ops")
    assert t.new_keys_file == USER_FILES[0]


def test_ansible_names_win_over_ssh_args_and_old_aliases_still_work():
    t = target("n", {"ansible_ssh_host": "10.0.0.1", "ansible_ssh_port": "2200", "ansible_ssh_user": "u",
                     "ansible_ssh_common_args": "-p 9999 -l other -i /k2 -oIdentityFile=/k3"})
    assert (t.hostname, t.port, t.user) == ("10.0.0.1", 2200, "u")
    assert t.key_files == ("/k2", "/k3")
    t = target("n", {"ansible_ssh_common_args": "-p 9999 -l other"})
    assert (t.port, t.user) == (9999, "other")


@pytest.mark.parametrize("args", ["-J jumper@bastion:2200,10.0.0.9", "-o ProxyJump=jumper@bastion:2200,10.0.0.9",
                                  "-o 'ProxyJump jumper@bastion:2200,10.0.0.9'", "-Jjumper@bastion:2200,10.0.0.9"])
def test_proxy_jump_forms(args):
    t = target("n", {"ansible_ssh_common_args": args})
    assert t.jumps == (Hop("bastion", 2200, "jumper"), Hop("10.0.0.9", 22, None))


def test_jump_specs_with_ipv6_and_none():
    assert parse_jumps("[fd00::1]:2222") == (Hop("fd00::1", 2222, None),)
    assert parse_jumps("ssh://u@h") == (Hop("h", 22, "u"),)
    assert parse_jumps("none") == ()
    with pytest.raises(SettingsError):
        parse_jumps("a,,b")


def test_first_ssh_option_wins_as_in_ssh():
    t = target("n", {"ansible_ssh_common_args": "-o UserKnownHostsFile=/first",
                     "ansible_ssh_extra_args": "-o UserKnownHostsFile=/second"})
    assert t.new_keys_file == "/first" and "/second" not in t.known_hosts_files


def test_host_key_alias_and_connect_timeout():
    t = target("n", {"ansible_ssh_common_args": "-o HostKeyAlias=gpu-7 -o ConnectTimeout=4"})
    assert t.host_key_alias == "gpu-7" and t.connect_timeout_s == 4.0


@pytest.mark.parametrize("vars_, needle", [
    ({"ansible_ssh_common_args": "-o ProxyCommand='ssh -W %h:%p bastion'"}, "ProxyCommand"),
    ({"ansible_host": "{{ lookup('env', 'X') }}"}, "ansible_host is a Jinja template"),
    ({"ansible_port": "ssh"}, "ansible_port must be a port number"),
    ({"ansible_port": 70000}, "1-65535"),
    ({"ansible_ssh_common_args": "-F ~/.ssh/config"}, "ssh_config"),
    ({"ansible_ssh_common_args": "-o 'unbalanced"}, "cannot split"),
    ({"ansible_become": True, "ansible_become_method": "su"}, "only sudo"),
])
def test_settings_fabricproof_cannot_honour_are_refused_with_the_var_named(vars_, needle):
    with pytest.raises(SettingsError, match=needle):
        target("n", vars_)


def test_become_uses_non_interactive_sudo():
    assert target("n", {"ansible_become": "yes"}).become == ("sudo", "-n", "--")
    assert target("n", {"ansible_become": True, "ansible_become_user": "svc"}).become == ("sudo", "-n", "-u", "svc", "--")
    assert target("n", {"ansible_become": "false"}).become == ()


def test_password_never_shows_in_repr():
    t = target("n", {"ansible_password": "hunter2-secret"})
    assert t.password == "hunter2-secret"
    assert "hunter2" not in repr(t)


def test_ssh_options_come_without_paramiko_and_paramiko_without_invoke():
    # A sharded run's parent makes the SSH options and never connects: paramiko (~0.15 s of CPU) stays unloaded. A
    # process that connects loads paramiko without invoke (~80 ms, only for ssh_config's `Match exec`), which stays
    # importable.
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys\n"
            "from fabricproof import transport\n"
            "assert type(transport.configure('ssh')).__name__ == 'SSHOptions'\n"
            "assert 'paramiko' not in sys.modules, 'paramiko'\n"
            "import fabricproof.transport.ssh\n"
            "assert 'paramiko' in sys.modules and 'invoke' not in sys.modules, 'invoke'\n"
            "import invoke\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "cli")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
