"""Pure parts of the lab runtime: host layout, sshd_config, inventory, known_hosts, /proc parsing, state."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from fabricproof_lab import netstat, nodestore, procs, sshd
from fabricproof_lab.errors import LabError
from fabricproof_lab.inventory import (
    known_hosts_entry,
    render_inventory,
    render_known_hosts,
    render_ssh_config,
)
from fabricproof_lab.layout import ROOT_DEFAULT_DIR, LabLayout, default_lab_dir
from fabricproof_lab.state import LabState, SshdGroup
from fabricproof_lab.topology import MAX_NODES, node_address, plan_hosts, validate_shape
from fabricproof_lab.user import blocking_dir, can_traverse

LAB = Path("/srv/lab")


# ------------------------------------------------------------------------------------ topology


def test_node_addresses_skip_zero_and_wrap_every_250() -> None:
    assert node_address(0) == "127.10.0.1"
    assert node_address(249) == "127.10.0.250"
    assert node_address(250) == "127.10.1.1"
    assert node_address(999) == "127.10.3.250"
    with pytest.raises(ValueError):
        node_address(-1)


def test_single_profile_hosts_are_named_per_profile_with_unique_addresses() -> None:
    hosts = plan_hosts(300, "dgx-h100")
    assert [h.name for h in hosts[:2]] == ["h100-0001", "h100-0002"]
    assert hosts[-1].name == "h100-0300" and hosts[-1].address == "127.10.1.50"
    assert len({h.address for h in hosts}) == 300
    assert {h.rack for h in hosts} == {None}


def test_gb200_trays_fill_racks_of_18() -> None:
    hosts = plan_hosts(40, "gb200-nvl72")
    assert [h.rack for h in hosts].count(1) == 18
    assert hosts[17].rack == 1 and hosts[18].rack == 2 and hosts[-1].rack == 3
    assert hosts[18].name == "gb200-0019" and hosts[18].index == 18


def test_mixed_lab_groups_profiles_in_contiguous_blocks() -> None:
    hosts = plan_hosts(64, "mixed")
    profiles = [h.profile for h in hosts]
    blocks = [p for k, p in enumerate(profiles) if k == 0 or profiles[k - 1] != p]
    assert sorted(blocks) == ["dgx-a100", "dgx-h100", "gb200-nvl72", "hgx-h200"]  # each profile exactly one block
    for prof in blocks:
        mine = [h for h in hosts if h.profile == prof]
        assert [h.index for h in mine] == list(range(len(mine)))  # index counts within the profile
    assert len({h.name for h in hosts}) == 64


@pytest.mark.parametrize(("nodes", "profile"), [(0, "dgx-h100"), (MAX_NODES + 1, "dgx-h100"), (4, "dgx-v100")])
def test_invalid_shapes_are_refused(nodes: int, profile: str) -> None:
    with pytest.raises(ValueError):
        validate_shape(nodes, profile)


# ----------------------------------------------------------------------------------- sshd_config


def _nodes(addresses: list[str]) -> list[sshd.NodeEnv]:
    return [sshd.NodeEnv(a, LAB / "nodes" / a, LAB / "nodes" / a / "root") for a in addresses]


def _config(addresses: list[str], port: int = 22022) -> str:
    return sshd.render_config(title="t", addresses=addresses, port=port, host_key=LAB / "keys/hk",
                              authorized_keys=LAB / "keys/authorized_keys", user="fabricproof-lab",
                              tools_dir=LAB / "bin", nodes=_nodes(addresses))


def test_sshd_config_listens_on_each_address_and_sets_per_node_env_in_match_blocks() -> None:
    addresses = [node_address(i) for i in range(16)]
    text = _config(addresses)
    lines = text.splitlines()
    assert [ln for ln in lines if ln.startswith("ListenAddress")] == [f"ListenAddress {a}:22022" for a in addresses]
    match = lines.index("Match LocalAddress 127.10.0.2")
    assert lines[match + 1].split() == [
        "SetEnv", "PATH=/srv/lab/bin:/usr/local/bin:/usr/bin:/bin",
        "FABRICPROOF_LAB_NODE=/srv/lab/nodes/127.10.0.2", "FABRICPROOF_HOST_ROOT=/srv/lab/nodes/127.10.0.2/root",
        "OMPI_MCA_orte_tmpdir_base=/srv/lab/nodes/127.10.0.2/tmp"]
    # A global SetEnv would be silently replaced inside every Match block (OpenSSH 9.2): none allowed.
    assert not [ln for ln in lines[:lines.index("Match LocalAddress 127.10.0.1")] if ln.startswith("SetEnv")]
    for directive in ("PasswordAuthentication no", "PermitRootLogin no", "AllowUsers fabricproof-lab",
                      "MaxStartups 2000", "StrictModes no", "UsePAM no", "PidFile none",
                      "AuthorizedKeysFile /srv/lab/keys/authorized_keys"):
        assert directive in lines


def test_sshd_config_puts_the_labs_sitecustomize_and_its_cache_in_every_nodes_environment() -> None:
    addresses = [node_address(i) for i in range(3)]
    python = sshd.NodePython(LAB / "lib/node-python", LAB / "zipcache")
    text = sshd.render_config(title="t", addresses=addresses, port=22022, host_key=LAB / "keys/hk",
                              authorized_keys=LAB / "keys/authorized_keys", user="fabricproof-lab",
                              tools_dir=LAB / "bin", nodes=_nodes(addresses), python=python)
    setenvs = [ln.split() for ln in text.splitlines() if ln.strip().startswith("SetEnv")]
    assert len(setenvs) == 3
    for words in setenvs:
        assert words[-2:] == ["PYTHONPATH=/srv/lab/lib/node-python", "FABRICPROOF_LAB_ZIPCACHE=/srv/lab/zipcache"]
    with pytest.raises(LabError, match="characters"):
        sshd.render_config(title="t", addresses=addresses, port=22022, host_key=LAB / "keys/hk",
                           authorized_keys=LAB / "keys/authorized_keys", user="fabricproof-lab",
                           tools_dir=LAB / "bin", nodes=_nodes(addresses),
                           python=sshd.NodePython(LAB / "lib/node-python", Path("/tmp/zip cache")))


def test_sshd_config_refuses_more_than_16_listen_addresses() -> None:
    with pytest.raises(ValueError):
        _config([node_address(i) for i in range(17)])


@pytest.mark.parametrize("address", ["0.0.0.0", "10.0.0.1", "::1", "192.168.1.10"])
def test_sshd_config_refuses_non_loopback_addresses(address: str) -> None:
    with pytest.raises(LabError, match="127.0.0.0/8 only"):
        _config([address])


def test_lab_paths_that_sshd_config_cannot_carry_are_refused() -> None:
    sshd.assert_safe_path(Path("/var/lib/fabricproof/lab-2"))
    with pytest.raises(LabError, match="characters"):
        sshd.assert_safe_path(Path("/tmp/my lab"))


# ----------------------------------------------------------------------------------- inventory


def test_inventory_groups_hosts_by_profile_and_rack_with_connection_vars() -> None:
    hosts = plan_hosts(20, "gb200-nvl72")
    inv = render_inventory(hosts, port=22022, user="fabricproof-lab", client_key=LAB / "keys/id_ed25519",
                           known_hosts=LAB / "known_hosts")
    lab = inv["all"]["children"]["lab"]
    assert lab["vars"] == {
        "ansible_port": 22022, "ansible_user": "fabricproof-lab",
        "ansible_ssh_private_key_file": "/srv/lab/keys/id_ed25519",
        "ansible_ssh_common_args": "-o UserKnownHostsFile=/srv/lab/known_hosts -o StrictHostKeyChecking=yes "
                                   "-o IdentitiesOnly=yes",
        "ansible_python_interpreter": "/usr/bin/python3"}
    groups = lab["children"]
    assert set(groups) == {"dgx_a100", "dgx_h100", "hgx_h200", "gb200_nvl72", "rack_01", "rack_02"}
    assert groups["dgx_a100"] == groups["dgx_h100"] == groups["hgx_h200"] == {}  # declared: the lab baseline names them
    assert len(groups["gb200_nvl72"]["hosts"]) == 20
    assert list(groups["rack_02"]["hosts"]) == ["gb200-0019", "gb200-0020"]
    assert groups["gb200_nvl72"]["hosts"]["gb200-0019"] == {
        "ansible_host": "127.10.0.19", "fabricproof_lab_profile": "gb200-nvl72",
        "fabricproof_data_address": "127.10.0.19", "rack": 2}


def test_mixed_inventory_has_one_group_per_profile() -> None:
    inv = render_inventory(plan_hosts(32, "mixed"), port=2, user="u", client_key=LAB / "k", known_hosts=LAB / "kh")
    groups = inv["all"]["children"]["lab"]["children"]
    assert {"dgx_a100", "dgx_h100", "hgx_h200", "gb200_nvl72"} <= set(groups)
    assert "rack" not in groups["dgx_h100"]["hosts"]["h100-0001"]
    assert yaml.safe_load(yaml.safe_dump(inv)) == inv  # plain data only


def test_known_hosts_has_one_bracketed_line_per_node() -> None:
    hosts = plan_hosts(3, "dgx-a100")
    text = render_known_hosts(hosts, 22022, "ssh-ed25519 AAAAC3Nz")
    assert text.splitlines() == [f"[127.10.0.{i}]:22022 ssh-ed25519 AAAAC3Nz" for i in (1, 2, 3)]
    assert known_hosts_entry("127.10.0.1", 22) == "127.10.0.1"


def test_ssh_config_maps_inventory_names_to_addresses_with_strict_checking() -> None:
    text = render_ssh_config(plan_hosts(2, "dgx-h100"), port=22022, user="fabricproof-lab",
                             client_key=LAB / "k", known_hosts=LAB / "kh")
    assert "Host h100-0002\n    HostName 127.10.0.2\n" in text
    assert "    StrictHostKeyChecking yes" in text and "    UserKnownHostsFile /srv/lab/kh" in text


# ------------------------------------------------------------------------------ /proc parsing

TCP4 = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 010A0A7F:5606 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0100007F:0CEA 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000
   1: 0000000000000000FFFF00000100007F:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000
"""


def test_proc_net_tcp_listeners_are_decoded_and_established_sockets_ignored() -> None:
    assert netstat.parse_listeners(TCP4, "little") == {("127.0.0.1", 3306), ("127.10.10.1", 22022)}
    assert netstat.parse_listeners(TCP6, "little") == {("::", 8080), ("127.0.0.1", 22)}


def test_port_holders_include_wildcard_listeners() -> None:
    listening = {("127.10.0.1", 22022), ("::", 8080), ("127.0.0.1", 22022)}
    assert netstat.holders(22022, ["127.10.0.1", "127.10.0.2"], listening) == ["127.10.0.1"]
    assert netstat.holders(8080, ["127.10.0.1"], listening) == ["::"]
    assert netstat.listening_on(22022, ["127.10.0.1", "127.10.0.2"], listening) == {"127.10.0.1"}


def test_proc_stat_with_spaces_and_parens_in_the_command_name() -> None:
    info = procs.parse_stat("4242 (sshd: a (b) c) S 17 4242 4242 0 -1 4194560 0 0")
    assert (info.pid, info.state, info.ppid) == (4242, "S", 17)


def test_descendants_walk_the_whole_tree_and_skip_zombies() -> None:
    table = {p.pid: p for p in [procs.ProcInfo(10, 1, "S"), procs.ProcInfo(11, 10, "S"), procs.ProcInfo(12, 11, "S"),
                                procs.ProcInfo(13, 12, "R"), procs.ProcInfo(14, 10, "Z"), procs.ProcInfo(20, 1, "S")]}
    assert procs.descendants([10], table) == {11, 12, 13}


# ------------------------------------------------------------------------------ user and dirs


def _st(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 0, 0, 2, uid, gid, 4096, 0, 0, 0))


def test_traversal_follows_owner_group_other_bits() -> None:
    assert can_traverse(_st(0o711), uid=999, groups=frozenset({999}))
    assert not can_traverse(_st(0o700), uid=999, groups=frozenset({999}))
    assert can_traverse(_st(0o700, uid=999), uid=999, groups=frozenset())
    assert can_traverse(_st(0o710, gid=5), uid=999, groups=frozenset({5}))
    assert not can_traverse(_st(0o701, gid=5), uid=999, groups=frozenset({5}))  # group bits win over other


def test_blocking_dir_names_the_first_untraversable_parent() -> None:
    modes = {"/": 0o755, "/tmp": 0o1777, "/tmp/pytest-of-root": 0o700, "/tmp/pytest-of-root/lab": 0o755}
    found = blocking_dir(Path("/tmp/pytest-of-root/lab"), 999, frozenset({999}), lambda p: _st(modes[str(p)]))
    assert found is not None and found[0] == Path("/tmp/pytest-of-root")
    modes["/tmp/pytest-of-root"] = 0o711
    assert blocking_dir(Path("/tmp/pytest-of-root/lab"), 999, frozenset(), lambda p: _st(modes[str(p)])) is None


def test_directories_still_to_be_created_do_not_block() -> None:
    modes = {"/": 0o755, "/srv": 0o755}

    def fake_stat(path: Path) -> os.stat_result:
        if str(path) not in modes:
            raise FileNotFoundError(path)
        return _st(modes[str(path)])

    assert blocking_dir(Path("/srv/new/lab"), 999, frozenset(), fake_stat) is None


def test_default_lab_dir_is_fhs_for_root_and_xdg_state_otherwise() -> None:
    assert default_lab_dir(euid=0, environ={}) == ROOT_DEFAULT_DIR
    assert default_lab_dir(euid=1000, environ={"XDG_STATE_HOME": "/h/st"}) == Path("/h/st/fabricproof/lab")
    assert default_lab_dir(euid=1000, environ={"HOME": "/home/u"}) == Path("/home/u/.local/state/fabricproof/lab")


def test_layout_paths_are_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    layout = LabLayout.at(Path("rel"))
    assert layout.sshd_config(3) == tmp_path / "rel" / "sshd" / "sshd-003.conf"
    assert layout.host_root("127.10.0.1") == tmp_path / "rel" / "nodes" / "127.10.0.1" / "root"


# ----------------------------------------------------------------------------------- state


def test_state_round_trips_through_json(tmp_path: Path) -> None:
    from fabricproof_lab import state

    hosts = plan_hosts(20, "gb200-nvl72")
    lab = LabState(dir="/srv/lab", profile="gb200-nvl72", nodes=20, port=22022, user="fabricproof-lab",
                   hosts=hosts, sshd=[SshdGroup(0, "/c0", "/l0", [h.address for h in hosts[:16]], pid=123),
                                      SshdGroup(1, "/c1", "/l1", [h.address for h in hosts[16:]])])
    state.save(tmp_path / "lab.json", lab)
    back = state.load(tmp_path / "lab.json")
    assert back == lab
    assert back is not None and back.pids() == [123] and back.host("gb200-0019") == hosts[18]
    assert back.host("127.10.0.20") == hosts[19] and back.host("nope") is None
    assert state.load(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text('{"version": 99}')
    with pytest.raises(LabError, match="not a readable lab state"):
        state.load(tmp_path / "bad.json")


# ---------------------------------------------------------------------------------- node store

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw,relatime,size=24683652k 0 0
tmpfs /run/user/0 tmpfs rw 0 0
/dev/vdb /srv/with\\040space ext4 rw 0 0
"""


def test_mount_fstype_picks_the_longest_mount_point() -> None:
    assert nodestore.mount_fstype(Path("/dev/shm"), MOUNTS) == "tmpfs"
    assert nodestore.mount_fstype(Path("/dev/shm/x/y"), MOUNTS) == "tmpfs"
    assert nodestore.mount_fstype(Path("/dev/shmx"), MOUNTS) == "ext4"  # a prefix of the name is not a parent
    assert nodestore.mount_fstype(Path("/srv/with space/lab"), MOUNTS) == "ext4"
    assert nodestore.mount_fstype(Path("/var/lib/fabricproof"), MOUNTS) == "ext4"


def test_orphaned_stores_are_swept_and_live_or_unknown_ones_kept(tmp_path: Path) -> None:
    shm, labs = tmp_path / "shm", tmp_path / "labs"
    shm.mkdir()
    labs.mkdir()

    def store(name: str, owner: Path | None) -> Path:
        path = shm / (nodestore.STORE_PREFIX + name)
        path.mkdir()
        if owner is not None:
            (path / nodestore.OWNER).write_text(f"{owner}\n")
        return path

    live = store("live", labs / "a" / "nodes")
    (labs / "a").mkdir()
    (labs / "a" / "nodes").symlink_to(live)
    gone = store("gone", labs / "deleted" / "nodes")  # its lab dir was rm -rf'ed
    replaced = store("replaced", labs / "a" / "nodes")  # the same lab dir now links to another store
    unknown = store("unknown", None)
    assert nodestore.sweep_orphans(min_age_s=3600, tmpfs_dir=shm) == []  # too young to judge
    assert set(nodestore.sweep_orphans(min_age_s=0, tmpfs_dir=shm)) == {gone, replaced}
    assert live.exists() and unknown.exists() and not gone.exists() and not replaced.exists()
