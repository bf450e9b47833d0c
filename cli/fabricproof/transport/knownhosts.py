"""OpenSSH known_hosts: parse, match a host (hashed names, wildcards, negation, @revoked), judge an offered key.

The verdicts follow OpenSSH 9 (checked against its `ssh` on the lab's sshd, tests/transport/test_hostkeys_lab.py):
a host known under its name with any plain key that is not the offered one has CHANGED, whatever the key types;
a @revoked line revokes a key for the hosts its patterns match; @cert-authority lines are not host keys.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

SYSTEM_FILES = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
USER_FILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")


@dataclass(frozen=True)
class Entry:
    """One known_hosts line."""

    patterns: str  # as written: comma-separated patterns, or one |1|salt|hash
    keytype: str
    blob: bytes
    marker: str = ""  # "", "@revoked" or "@cert-authority"
    source: str = ""  # file:line, for messages

    def matches(self, name: str) -> bool:
        return match_patterns(self.patterns, name)


def host_id(hostname: str, port: int, alias: str | None = None) -> str:
    """How OpenSSH names a host in known_hosts: the HostKeyAlias as given (never with the port), else the name
    bare on port 22 and `[host]:port` otherwise."""
    if alias:
        return alias.lower()
    return hostname.lower() if port == 22 else f"[{hostname.lower()}]:{port}"


def fallback_id(hostname: str, port: int, alias: str | None = None) -> str | None:
    """The name OpenSSH also accepts a known key under when `[host]:port` is new: the bare host name (not with
    a HostKeyAlias, not on port 22). A key it finds there is accepted; anything else it finds there is ignored."""
    return None if alias or port == 22 else hostname.lower()


@lru_cache(maxsize=512)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    # OpenSSH patterns know only '*' and '?'; everything else is literal.
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _hashed_match(field: str, name: str) -> bool:
    parts = field.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)


def match_patterns(patterns: str, name: str) -> bool:
    """OpenSSH match_hostname: any positive pattern matches and no negated one does."""
    if patterns.startswith("|"):
        return _hashed_match(patterns, name)
    name = name.lower()
    hit = False
    for pat in patterns.split(","):
        negated = pat.startswith("!")
        pat = pat[1:] if negated else pat
        pat = pat.lower()
        # Most entries name one host: compare literally, and keep the regex (and its cache) for wildcards.
        if pat and (pat == name if "*" not in pat and "?" not in pat else _pattern_regex(pat).fullmatch(name)):
            if negated:
                return False
            hit = True
    return hit


def parse(text: str, source: str = "") -> list[Entry]:
    """Entries of a known_hosts file; comments, blank and unreadable lines are skipped (as ssh does)."""
    out: list[Entry] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        marker = ""
        if fields[0].startswith("@"):
            marker, fields = fields[0], fields[1:]
        if len(fields) < 3:
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except (binascii.Error, ValueError):
            continue
        out.append(Entry(fields[0], fields[1], blob, marker, f"{source}:{lineno}" if source else str(lineno)))
    return out


def fingerprint(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a public key blob, e.g. SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def line(name: str, keytype: str, blob: bytes) -> str:
    return f"{name} {keytype} {base64.b64encode(blob).decode()}\n"


class Verdict(enum.Enum):
    KNOWN = "known"
    CHANGED = "changed"  # the host is known, with other keys (of this type or another): OpenSSH refuses
    UNKNOWN = "unknown"  # no plain key at all for the host: accept-new may record it
    REVOKED = "revoked"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    expected: tuple[Entry, ...] = ()  # the entries the offered key was compared with


def judge(entries: Sequence[Entry], name: str, keytype: str, blob: bytes) -> Judgement:
    """Is `blob` the key of host `name`, as OpenSSH's check_key_in_hostkeys decides? Revoked (by a @revoked line
    naming the host) beats everything; then known; a host known with other plain keys has changed, the keys of
    the offered type listed first; a host with no plain key is unknown. @cert-authority lines are not plain host
    keys and never match (paramiko checks no host certificates)."""
    for e in entries:
        if e.marker == "@revoked" and e.blob == blob and e.matches(name):
            return Judgement(Verdict.REVOKED, (e,))
    mine = [e for e in entries if not e.marker and e.matches(name)]
    if any(e.blob == blob for e in mine):
        return Judgement(Verdict.KNOWN)
    if mine:
        return Judgement(Verdict.CHANGED, tuple(sorted(mine, key=lambda e: e.keytype != keytype)))
    return Judgement(Verdict.UNKNOWN)


def known_types(entries: Sequence[Entry], name: str) -> list[str]:
    """Key types known for a host, in file order: the client offers these first, as OpenSSH does."""
    seen: dict[str, None] = {}
    for e in entries:
        if not e.marker and e.matches(name):
            seen.setdefault(e.keytype, None)
    return list(seen)


@dataclass
class _Index:
    """One file's entries, indexed so a 1,000-line known_hosts costs a dict lookup per host, not a scan."""

    entries: list[Entry]
    exact: dict[str, list[Entry]] = field(default_factory=dict)  # plain names of plain entries
    scan: list[Entry] = field(default_factory=list)  # hashed, wildcard, negated or marked: matched one by one

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        pats = entry.patterns.split(",")
        if entry.marker or entry.patterns.startswith("|") or any(c in p for p in pats for c in "*?!"):
            self.scan.append(entry)
        else:
            for p in pats:
                self.exact.setdefault(p.lower(), []).append(entry)


class KnownHosts:
    """The known_hosts files of a run, read once and shared by every connection; appends are serialised."""

    def __init__(self, files: Iterable[str | Path]):
        self.files = tuple(dict.fromkeys(os.path.expanduser(str(f)) for f in files))
        self._index: dict[str, _Index] = {}
        self._lock = threading.Lock()

    def _load(self, file: str) -> _Index:
        # Called with the lock held.
        index = self._index.get(file)
        if index is None:
            try:
                text = Path(file).read_text(encoding="utf-8", errors="replace")
            except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError):
                text = ""
            index = self._index[file] = _Index([])
            for entry in parse(text, file):
                index.add(entry)
        return index

    def entries(self, files: Sequence[str] | None = None) -> list[Entry]:
        """Every entry of the given files (default: all), each file read once per run."""
        with self._lock:
            return [e for f in (self.files if files is None else files) for e in self._load(os.path.expanduser(f)).entries]

    def relevant(self, files: Sequence[str], name: str) -> list[Entry]:
        """The entries that can decide about host `name`: those naming it, and every marked one (@revoked).
        judge() and known_types() give the same answers on this list as on all entries."""
        out: list[Entry] = []
        key = name.lower()
        with self._lock:
            for f in files:
                index = self._load(os.path.expanduser(f))
                out += index.exact.get(key, ())
                out += [e for e in index.scan if e.marker or e.matches(name)]
        return out

    def add(self, file: str, name: str, keytype: str, blob: bytes) -> None:
        """Append a newly accepted key (accept-new) and remember it for the rest of the run."""
        file = os.path.expanduser(file)
        with self._lock:
            index = self._load(file)
            path = Path(file)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            needs_nl = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(("\n" if needs_nl else "") + line(name, keytype, blob))
            index.add(Entry(name, keytype, blob, "", f"{file}:new"))
