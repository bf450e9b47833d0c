"""What a run may take from an earlier run on this machine: a JSON document kept under a key made from its inputs."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import InputError, WriteError
from .fsutil import atomic_write_text, private_dir
from .paths import state_dir

#: Under the state directory ($FABRICPROOF_STATE_DIR, default /var/lib/fabricproof), owner-only.
CACHE_DIR = "cache"
#: A kept document larger than this is not read (the packaged catalog's is ~0.15 MB).
MAX_BYTES = 16 << 20


def _private(st: os.stat_result) -> bool:
    """This user's own, and no one else may change it: anything else is not read."""
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read(name: str, key: str) -> Any | None:
    """The data kept as `name` under `key`, or None: nothing kept, another key (its inputs changed), or a file or
    directory that is a link, not this user's own, writable by others, or not a JSON document this module wrote."""
    directory = state_dir() / CACHE_DIR
    try:
        dir_st = os.lstat(directory)
        if not stat.S_ISDIR(dir_st.st_mode) or not _private(dir_st):
            return None
        fd = os.open(directory / f"{name}.json", os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or not _private(st) or st.st_size > MAX_BYTES:
                return None
            doc = json.loads(fh.read(MAX_BYTES + 1))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or "data" not in doc:
        return None
    return doc["data"]


def write(name: str, key: str, data: Any) -> None:
    """Keep `data` as `name` under `key` (owner-only, written whole or not at all). A state directory that cannot
    take it (missing, read-only, not ours) only means the next run does the work again."""
    root = state_dir()
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = private_dir(root, CACHE_DIR)
        dir_st = os.lstat(directory)
        if not _private(dir_st):
            return
        atomic_write_text(Path(directory) / f"{name}.json", json.dumps({"key": key, "data": data}), mode=0o600)
    except (OSError, InputError, WriteError):
        return
