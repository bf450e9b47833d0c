"""Outputs an operator names (-f FORMAT=PATH, --output, schema export DIR) are written the way they expect: a
device, a FIFO, a link to one or an open descriptor's name is written where it is (never renamed over, never
chmod-ed: as root a rename would replace /dev/null for every process); a link to a file keeps the link; a directory
or a missing parent is refused with exit 2 before any host is touched, and so is a run directory holding a
planted link. Every device node here is a private one made with mknod in a temporary directory, never the
machine's own."""

from __future__ import annotations

import json
import os
import select
import stat
import threading
import time
from pathlib import Path

import pytest
from labkit import lab_baseline_children

from fabricproof.errors import InputError
from fabricproof.fsutil import check_target

from .helpers import REPO, run

LAB = REPO / "inventories" / "lab"
VALIDATE = ("validate", "--facts", LAB / "facts", "-b", LAB / "baseline.yaml")


def private_null(path: Path) -> Path:
    """A /dev/null of the test's own (character device 1:3), world-writable as the real one is."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod(path, 0o666)  # whatever the umask
    return path


def same_node(path: Path, before: os.stat_result) -> bool:
    """Still the very node it was (not replaced by a rename), with its type and mode untouched."""
    now = os.lstat(path)
    return (now.st_ino, now.st_mode, now.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)


class Drain:
    """A reader of a FIFO in a thread of its own, as a consumer process would be. It opens the FIFO before the
    command does (non-blocking: neither side's open waits) and reads until the writer closes it, within a bound, so
    the thread ends even when the command never writes (or replaced the FIFO by a rename)."""

    def __init__(self, fifo: Path, bound_s: float = 60.0):
        self.data = b""
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.bound_s = bound_s
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        deadline = time.monotonic() + self.bound_s
        try:
            while time.monotonic() < deadline:
                if not select.select([self.fd], [], [], 0.2)[0]:
                    continue
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if chunk:
                    self.data += chunk
                elif self.data:
                    return  # end of file once the writer has written and closed it
                else:
                    time.sleep(0.05)  # no writer yet: a FIFO without one reads as end of file
        finally:
            os.close(self.fd)

    def result(self) -> bytes:
        self.thread.join(timeout=self.bound_s + 10)
        return self.data


# ------------------------------------------------------------------------------------ validate -f FORMAT=PATH


def test_a_device_target_is_written_in_place_never_replaced(tmp_path):
    null = private_null(tmp_path / "null")
    before = os.lstat(null)
    res = run(*VALIDATE, "-f", f"json={null}", "-f", f"junit={tmp_path / 'junit.xml'}")
    assert res.exit_code == 0, res.output
    assert same_node(null, before) and stat.S_ISCHR(os.lstat(null).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml", "null"]  # no temp file left beside it


def test_a_link_to_a_device_keeps_the_link_and_the_device(tmp_path):
    """`-f json=/dev/stdout` (a link into /proc) or any link to a device: written through, nothing renamed."""
    null = private_null(tmp_path / "null")
    link = tmp_path / "stdout"
    link.symlink_to(null)
    before = os.lstat(null)
    res = run(*VALIDATE, "-f", f"json={link}")
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and os.readlink(link) == str(null) and same_node(null, before)


def test_a_fifo_target_gets_the_report_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    drain = Drain(fifo)
    res = run(*VALIDATE, "-f", f"json={fifo}")
    assert res.exit_code == 0, res.output
    doc = json.loads(drain.result())
    assert doc["kind"] == "Report" and doc["summary"]["hosts"] == len(list((LAB / "facts").glob("*.json")))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_a_file_is_kept_and_the_file_it_names_replaced(tmp_path):
    real = tmp_path / "reports" / "fabric.json"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    res = run(*VALIDATE, "-f", f"json={link}")
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["summary"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


def test_a_file_descriptor_name_is_appended_to_not_replaced(tmp_path):
    """/dev/fd/N (what /dev/stdout resolves to) of a log a shell opened with >>: the log keeps what it held."""
    log = tmp_path / "run.log"
    with open(log, "a") as held:
        held.write("earlier line\n")
        held.flush()
        inode = os.fstat(held.fileno()).st_ino
        res = run(*VALIDATE, "-f", f"json=/dev/fd/{held.fileno()}")
    assert res.exit_code == 0, res.output
    earlier, report = log.read_text().split("\n", 1)
    assert earlier == "earlier line" and json.loads(report)["kind"] == "Report" and log.stat().st_ino == inode


@pytest.mark.parametrize("make", ["directory", "missing parent", "socket"])
def test_a_target_that_cannot_be_a_file_exits_2_before_any_host_is_touched(tmp_path, make):
    """Live: the inventory's host would be collected into --run-dir; refused first, nothing is created."""
    if make == "directory":
        target = tmp_path / "out"
        target.mkdir()
        why = "--format json: a directory; name a file"
    elif make == "missing parent":
        target = tmp_path / "nowhere" / "r.json"
        why = f"--format json: no directory {tmp_path / 'nowhere'}; create it first"
    else:
        import socket

        target = tmp_path / "s.sock"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
        sock.close()
        why = "--format json: a socket"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    n1: {ansible_host: 127.0.0.1, ansible_port: 1}\n")
    res = run("validate", "-i", inventory, "-b", LAB / "baseline.yaml", "--run-dir", tmp_path / "run",
              "-f", "table", "-f", f"json={target}")
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{target}: {why}" in lines[0]
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------ other commands


def test_check_local_refuses_a_directory_target_before_collecting(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    res = run("check", "--local", "-b", LAB / "baseline.yaml", "-f", "json", "-o", target,
              "--run-dir", tmp_path / "run")
    assert res.exit_code == 2 and "--output: a directory; name a file" in res.stderr
    assert not (tmp_path / "run").exists()


def test_check_local_refuses_a_facts_dir_that_is_not_a_directory_before_collecting(tmp_path):
    not_a_dir = tmp_path / "facts"
    not_a_dir.write_text("")
    res = run("check", "--local", "-b", LAB / "baseline.yaml", "--facts-dir", not_a_dir, "--run-dir", tmp_path / "run")
    assert res.exit_code == 2 and f"--facts-dir {not_a_dir} is not a directory" in res.stderr
    assert not (tmp_path / "run").exists()


def test_baseline_capture_writes_a_device_in_place_and_refuses_a_directory(tmp_path):
    null = private_null(tmp_path / "null")
    before = os.lstat(null)
    res = run("baseline", "capture", "--facts", LAB / "facts", "--host", "h100-0001", "-o", null)
    assert res.exit_code == 0, res.output
    assert same_node(null, before)
    res = run("baseline", "capture", "--facts", LAB / "facts", "--host", "h100-0001", "-o", tmp_path)
    assert res.exit_code == 2 and f"{tmp_path}: --output: a directory; name a file" in res.stderr


def test_schema_export_writes_through_a_link_to_a_device_and_refuses_a_file_for_its_directory(tmp_path):
    out = tmp_path / "schemas"
    out.mkdir()
    null = private_null(tmp_path / "null")
    (out / "baseline.schema.json").symlink_to(null)
    before = os.lstat(null)
    res = run("schema", "export", out)
    assert res.exit_code == 0, res.output
    assert (out / "baseline.schema.json").is_symlink() and same_node(null, before)
    assert json.loads((out / "facts.schema.json").read_text())["$schema"]
    res = run("schema", "export", null)
    assert res.exit_code == 2 and "schema export: not a directory" in res.stderr and same_node(null, before)


def test_check_target_names_the_option_and_the_file(tmp_path):
    with pytest.raises(InputError) as exc:
        check_target(tmp_path, "--format html")
    assert str(exc.value) == f"{tmp_path}: --format html: a directory; name a file"


# ------------------------------------------------------------------------------------ run directories


@pytest.mark.parametrize("command", ["collect", "validate"])
def test_a_link_planted_in_the_run_directory_exits_2_before_any_host_is_touched(tmp_path, command):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (run_dir / "raw").symlink_to(outside)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    n1: {ansible_host: 127.0.0.1, ansible_port: 1}\n" + lab_baseline_children())
    args = (("collect", "-o", run_dir) if command == "collect"
            else ("validate", "-b", LAB / "baseline.yaml", "--run-dir", run_dir))
    res = run(*args, "-i", inventory)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{run_dir / 'raw'}: a symbolic link inside a run directory (to {outside})" in lines[0]
    assert "connection refused" not in res.output and "127.0.0.1" not in res.output  # no host was tried
    assert list(outside.iterdir()) == [] and sorted(os.listdir(run_dir)) == ["raw"]
