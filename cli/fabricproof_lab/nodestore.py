"""Where a lab's node trees live: on tmpfs when it has room (fast to create), else inside the lab dir.

A node is ~165 small files (rendered outputs, sysfs-style one-value files). Measured on this
machine's ext4 (a shared VM disk), creating 1,000 nodes took 40-85 s and varied with other
I/O; on tmpfs the same 1,000 nodes took 12 s, bound by rendering CPU. The cost is memory:
tmpfs stores every small file in its own page, ~0.7 MB per node (665 MB for 1,000 nodes).
<lab>/nodes stays the one path everything uses; on tmpfs it is a symlink to the store.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

TMPFS_DIR = Path("/dev/shm")
STORE_PREFIX = "fabricproof-lab-nodes."
# Measured 665 KB per node (1,000 mixed nodes); headroom for faults that add files and for growth.
BYTES_PER_NODE = 1 << 20
KINDS = ("auto", "tmpfs", "disk")
OWNER = ".lab-nodes-link"  # inside a store: the <lab>/nodes link that owns it
ORPHAN_MIN_AGE_S = 300.0


def mount_fstype(path: Path, mounts_text: str) -> str | None:
    """Filesystem type of the mount holding `path`, from the text of /proc/self/mounts (longest match)."""
    best, fstype = -1, None
    target = str(path).rstrip("/") + "/"
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point = fields[1].replace("\\040", " ").rstrip("/") + "/"
        if target.startswith(mount_point) and len(mount_point) > best:
            best, fstype = len(mount_point), fields[2]
    return fstype


def tmpfs_room(nodes: int, tmpfs_dir: Path = TMPFS_DIR) -> str | None:
    """None when tmpfs can hold `nodes` nodes, else why not (a container's 64 MB /dev/shm, say)."""
    try:
        fstype = mount_fstype(tmpfs_dir, Path("/proc/self/mounts").read_text())
        free = shutil.disk_usage(tmpfs_dir).free
    except OSError as exc:
        return f"{tmpfs_dir}: {exc.strerror}"
    if fstype != "tmpfs":
        return f"{tmpfs_dir} is not a tmpfs"
    need = nodes * BYTES_PER_NODE
    if free < need:
        return f"{tmpfs_dir} has {free >> 20} MB free, {nodes} nodes need about {need >> 20} MB"
    return None


def is_store(path: Path, tmpfs_dir: Path = TMPFS_DIR) -> bool:
    """True only for a store this module made: never remove anything else."""
    return path.parent == tmpfs_dir and path.name.startswith(STORE_PREFIX) and not path.is_symlink()


def remove_nodes(nodes_link: Path) -> None:
    """Remove a lab's node trees: <lab>/nodes and, when it links to a tmpfs store of ours, the store."""
    if nodes_link.is_symlink():
        store = Path(os.readlink(nodes_link))
        if is_store(store) and store.exists():
            shutil.rmtree(store)
        nodes_link.unlink()
    elif nodes_link.exists():
        shutil.rmtree(nodes_link)


def make_nodes_dir(nodes_link: Path, use_tmpfs: bool) -> Path | None:
    """Create an empty <lab>/nodes (world-traversable); on tmpfs return the store it points to."""
    if not use_tmpfs:
        nodes_link.mkdir(mode=0o755)
        os.chmod(nodes_link, 0o755)
        return None
    store = Path(tempfile.mkdtemp(prefix=STORE_PREFIX, dir=TMPFS_DIR))  # random name: /dev/shm is world-writable
    os.chmod(store, 0o755)
    (store / OWNER).write_text(f"{nodes_link}\n")
    nodes_link.symlink_to(store)
    return store


def is_orphan(store: Path) -> bool:
    """A store whose lab is gone: its <lab>/nodes link no longer exists or points elsewhere.
    A store without an owner record is never an orphan: nothing proves its lab is gone."""
    try:
        owner = Path((store / OWNER).read_text().strip())
    except OSError:
        return False
    try:
        return Path(os.readlink(owner)) != store
    except OSError:  # no link any more: the lab dir was removed without `lab down --purge`
        return True


def sweep_orphans(min_age_s: float = ORPHAN_MIN_AGE_S, tmpfs_dir: Path = TMPFS_DIR) -> list[Path]:
    """Free the memory of stores whose lab directory was deleted by hand; returns what was removed.
    Young stores are skipped: a concurrent `lab up` may not have linked its new store yet."""
    removed: list[Path] = []
    now = time.time()
    for store in tmpfs_dir.glob(STORE_PREFIX + "*"):
        try:
            young = now - store.stat().st_mtime < min_age_s
        except FileNotFoundError:
            continue
        if not young and is_store(store, tmpfs_dir) and is_orphan(store):
            shutil.rmtree(store, ignore_errors=True)
            removed.append(store)
    return removed
