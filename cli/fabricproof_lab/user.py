"""The unprivileged login user of every lab, and whether it can reach a lab directory."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import LabError

LAB_USER = "fabricproof-lab"
LAB_SHELL = "/bin/sh"  # dash: no rc files, so a command costs one process start (root's bashrc: ~100 ms)
USERADD = "/usr/sbin/useradd"


@dataclass(frozen=True)
class LabUser:
    name: str
    uid: int
    gid: int
    groups: frozenset[int]
    home: Path


def lookup(name: str = LAB_USER) -> LabUser | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = frozenset({entry.pw_gid, *(g.gr_gid for g in grp.getgrall() if name in g.gr_mem)})
    return LabUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid, groups=groups, home=Path(entry.pw_dir))


def ensure_user(home: Path, name: str = LAB_USER) -> LabUser:
    """Create the lab user once if missing, and make sure its home exists and belongs to it.

    `-p '*'`: no password that could ever match, but not a locked account ('!'), which sshd
    with UsePAM no would refuse even for key logins.
    """
    user = lookup(name)
    if user is None:
        home.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        done = subprocess.run([USERADD, "--system", "--user-group", "--no-create-home", "--home-dir", str(home),
                               "--shell", LAB_SHELL, "--password", "*", name],
                              capture_output=True, text=True, check=False)
        user = lookup(name)  # a concurrent `lab up` may have created it first: that is fine
        if user is None:
            raise LabError(f"could not create the lab user {name}: {done.stderr.strip()}")
    if user.uid == 0:
        raise LabError(f"the lab user {name} has uid 0; the lab never logs in as root")
    # Ansible's remote temp dir lives in the home; a missing home makes sshd warn on every command.
    if not user.home.is_dir():
        user.home.mkdir(mode=0o700, parents=True)
        os.chown(user.home, user.uid, user.gid)
    return user


def can_traverse(st: os.stat_result, uid: int, groups: frozenset[int]) -> bool:
    """Whether a user with `uid`/`groups` may search a directory with this stat (ACLs aside)."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in groups:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blocking_dir(path: Path, uid: int, groups: frozenset[int],
                 stat_fn: Callable[[Path], os.stat_result] = os.stat) -> tuple[Path, os.stat_result] | None:
    """The first directory from / down to `path` that the user cannot traverse, or None.
    Directories that do not exist yet are not blockers: the lab creates them world-traversable."""
    path = Path(os.path.abspath(path))
    for directory in (*reversed(path.parents), path):
        try:
            st = stat_fn(directory)
        except FileNotFoundError:
            return None
        if not can_traverse(st, uid, groups):
            return directory, st
    return None


def require_traversable(path: Path, user: LabUser) -> None:
    found = blocking_dir(path, user.uid, user.groups)
    if found is not None:
        directory, st = found
        owner = _owner_name(st.st_uid)
        raise LabError(f"the lab user {user.name} cannot traverse {directory} (mode {stat.S_IMODE(st.st_mode):04o}, "
                       f"owner {owner}), so it could not reach the lab in {path}. "
                       f"Run `chmod o+x {directory}` or choose a --dir it can reach.")


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
