"""known_hosts semantics as OpenSSH has them: ports, hashed names, wildcards, negation, @revoked, fingerprints."""

from __future__ import annotations

import base64
import hashlib
import hmac

from fabricproof.transport import knownhosts
from fabricproof.transport.knownhosts import KnownHosts, Verdict, judge, parse

# A real ed25519 public key and the fingerprint `ssh-keygen -lf` printed for it.
KEY_B64 = "AAAAC3NzaC1lZDI1NTE5AAAAIL6GTr3AxgonHIqlzhcq85ZKzW2kXbW9S/1pNjlT0Jd9"
KEY_FP = "SHA256:Xm5sIVOYygDUGFhEzEc+Y4EilyBDLxD0yY101zr8nuI"
KEY = base64.b64decode(KEY_B64)
OTHER = base64.b64decode("AAAAC3NzaC1lZDI1NTE5AAAAIBvNlNfU6ioA0XlqowpRr5eXxfSbBPZ7kKxr6b1ZyK2e")


def hashed(name: str, salt: bytes = b"0123456789abcdefghij") -> str:
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def test_fingerprint_matches_ssh_keygen():
    assert knownhosts.fingerprint(KEY) == KEY_FP


def test_host_id_brackets_non_standard_ports_and_lowercases():
    assert knownhosts.host_id("Node1.Example", 22) == "node1.example"
    assert knownhosts.host_id("127.10.0.3", 2222) == "[127.10.0.3]:2222"


def test_parse_skips_comments_blank_and_broken_lines_and_keeps_markers():
    text = f"""# comment

[127.10.0.3]:2222 ssh-ed25519 {KEY_B64} comment here
@revoked * ssh-ed25519 {KEY_B64}
broken-line-without-key
bad ssh-ed25519 !!!notbase64!!!
"""
    entries = parse(text, "kh")
    assert [(e.patterns, e.marker) for e in entries] == [("[127.10.0.3]:2222", ""), ("*", "@revoked")]
    assert entries[0].source == "kh:3" and entries[0].blob == KEY


def test_a_bare_entry_does_not_match_another_port():
    entries = parse(f"127.10.0.3 ssh-ed25519 {KEY_B64}\n")
    assert judge(entries, "127.10.0.3", "ssh-ed25519", KEY).verdict is Verdict.KNOWN
    assert judge(entries, "[127.10.0.3]:2222", "ssh-ed25519", KEY).verdict is Verdict.UNKNOWN


def test_hashed_names_match_only_their_host():
    entries = parse(f"{hashed('[10.0.0.5]:2222')} ssh-ed25519 {KEY_B64}\n")
    assert judge(entries, "[10.0.0.5]:2222", "ssh-ed25519", KEY).verdict is Verdict.KNOWN
    assert judge(entries, "[10.0.0.6]:2222", "ssh-ed25519", KEY).verdict is Verdict.UNKNOWN


def test_wildcards_and_negation():
    entries = parse(f"*.gpu.example,!bad?.gpu.example ssh-ed25519 {KEY_B64}\n")
    assert judge(entries, "dgx7.gpu.example", "ssh-ed25519", KEY).verdict is Verdict.KNOWN
    assert judge(entries, "bad1.gpu.example", "ssh-ed25519", KEY).verdict is Verdict.UNKNOWN
    assert judge(entries, "dgx7.gpu.example.evil", "ssh-ed25519", KEY).verdict is Verdict.UNKNOWN
    assert knownhosts.match_patterns("10.0.0.[1]", "10.0.0.[1]")  # '[' is literal, not a class


def test_another_key_of_the_same_type_is_a_change_naming_the_line():
    entries = parse(f"a ssh-ed25519 {KEY_B64}\nb ssh-ed25519 {KEY_B64}\n", "/etc/kh")
    j = judge(entries, "a", "ssh-ed25519", OTHER)
    assert j.verdict is Verdict.CHANGED and [e.source for e in j.expected] == ["/etc/kh:1"]


def test_a_host_known_only_with_another_key_type_has_changed_as_openssh_says():
    """OpenSSH 9: "REMOTE HOST IDENTIFICATION HAS CHANGED", with or without accept-new (test_hostkeys_lab.py)."""
    entries = parse(f"a ssh-rsa {KEY_B64}\na ssh-ed25519 {KEY_B64}\n")
    j = judge(entries, "a", "ecdsa-sha2-nistp256", OTHER)
    assert j.verdict is Verdict.CHANGED and [e.keytype for e in j.expected] == ["ssh-rsa", "ssh-ed25519"]
    j = judge(entries, "a", "ssh-ed25519", OTHER)  # the offered type's lines come first
    assert j.verdict is Verdict.CHANGED and j.expected[0].keytype == "ssh-ed25519"
    assert judge(entries, "b", "ssh-ed25519", OTHER).verdict is Verdict.UNKNOWN


def test_revoked_wins_over_a_matching_line():
    entries = parse(f"a ssh-ed25519 {KEY_B64}\n@revoked * ssh-ed25519 {KEY_B64}\n")
    assert judge(entries, "a", "ssh-ed25519", KEY).verdict is Verdict.REVOKED


def test_a_revoked_line_revokes_the_key_only_for_the_hosts_it_names():
    entries = parse(f"a ssh-ed25519 {KEY_B64}\n@revoked b ssh-ed25519 {KEY_B64}\n")
    assert judge(entries, "a", "ssh-ed25519", KEY).verdict is Verdict.KNOWN
    assert judge(entries, "b", "ssh-ed25519", KEY).verdict is Verdict.REVOKED


def test_host_key_alias_is_the_name_whatever_the_port_and_the_bare_name_backs_up_other_ports():
    assert knownhosts.host_id("10.0.0.7", 2222, "gpu-7") == "gpu-7"
    assert knownhosts.host_id("10.0.0.7", 22, "GPU-7") == "gpu-7"
    assert knownhosts.fallback_id("10.0.0.7", 2222) == "10.0.0.7"
    assert knownhosts.fallback_id("10.0.0.7", 22) is None and knownhosts.fallback_id("10.0.0.7", 2222, "gpu-7") is None


def test_cert_authority_lines_are_not_host_keys():
    entries = parse(f"@cert-authority * ssh-ed25519 {KEY_B64}\n")
    assert judge(entries, "a", "ssh-ed25519", KEY).verdict is Verdict.UNKNOWN


def test_known_types_in_file_order():
    entries = parse(f"a ssh-rsa {KEY_B64}\na ssh-ed25519 {KEY_B64}\nb ecdsa-sha2-nistp256 {KEY_B64}\n")
    assert knownhosts.known_types(entries, "a") == ["ssh-rsa", "ssh-ed25519"]


def test_known_hosts_reads_missing_files_as_empty_and_appends_new_keys(tmp_path):
    kh = tmp_path / "sub" / "known_hosts"
    store = KnownHosts([kh, tmp_path / "absent"])
    assert store.entries() == []
    kh.parent.mkdir()
    kh.write_text(f"old ssh-ed25519 {KEY_B64}")  # no final newline: the append must not glue lines
    store = KnownHosts([kh])
    store.add(str(kh), "[127.10.0.9]:2222", "ssh-ed25519", OTHER)
    lines = kh.read_text().splitlines()
    assert lines == [f"old ssh-ed25519 {KEY_B64}", f"[127.10.0.9]:2222 ssh-ed25519 {base64.b64encode(OTHER).decode()}"]
    assert judge(store.entries(), "[127.10.0.9]:2222", "ssh-ed25519", OTHER).verdict is Verdict.KNOWN
    # a fresh reader of the file agrees
    assert judge(KnownHosts([kh]).entries(), "[127.10.0.9]:2222", "ssh-ed25519", OTHER).verdict is Verdict.KNOWN


def test_the_index_decides_like_a_full_scan(tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("".join([
        f"[10.0.0.1]:2222,alias-1 ssh-ed25519 {KEY_B64}\n",
        f"{hashed('[10.0.0.2]:2222')} ssh-ed25519 {KEY_B64}\n",
        f"*.gpu.example,!bad.gpu.example ssh-ed25519 {KEY_B64}\n",
        f"@revoked * ssh-ed25519 {base64.b64encode(OTHER).decode()}\n",
        *(f"[10.1.{i // 250}.{i % 250}]:2222 ssh-ed25519 {KEY_B64}\n" for i in range(1000)),
    ]))
    store = KnownHosts([kh])
    names = ["[10.0.0.1]:2222", "ALIAS-1", "[10.0.0.2]:2222", "n1.gpu.example", "bad.gpu.example", "[10.1.3.7]:2222",
             "[10.9.9.9]:2222"]
    for name in names:
        for blob in (KEY, OTHER):
            relevant = store.relevant([str(kh)], name)
            assert len(relevant) <= 4
            assert judge(relevant, name, "ssh-ed25519", blob) == judge(store.entries(), name, "ssh-ed25519", blob)
            assert knownhosts.known_types(relevant, name) == knownhosts.known_types(store.entries(), name)
