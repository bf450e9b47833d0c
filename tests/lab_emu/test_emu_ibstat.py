"""The emulated ibstat against the real one (issue 10.11): Debian's infiniband-diags ibstat, run over the lab node's
own /sys/class/infiniband (bind-mounted in a private mount namespace), is the oracle for every operator form."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REAL = Path("/usr/sbin/ibstat")
FORMS = [(), ("-l",), ("-s",), ("-p",), ("mlx5_0",), ("mlx5_0", "1"), ("-s", "mlx5_1"), ("-p", "mlx5_1"),
         ("--list_of_cas",), ("-V",)]
ERRORS = [("mlx5_0", "2"), ("nosuch",), ("-q",), ("--bogus",)]


def _oracle_reason() -> str | None:
    if not REAL.exists():
        return "Debian's ibstat is missing: apt-get install -y infiniband-diags"
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return "the oracle needs root and unshare(1) to bind the node's sysfs over /sys/class"
    return None


def real_ibstat(node_root: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ibstat with /sys/class replaced by the node's tree (and the umad ABI file libibumad checks)."""
    mad = tmp / "infiniband_mad"
    mad.mkdir(exist_ok=True)
    (mad / "abi_version").write_text("5\n")
    script = ('mount -t tmpfs none /sys/class && mkdir /sys/class/infiniband /sys/class/infiniband_mad && '
              'mount --bind "$1" /sys/class/infiniband && mount --bind "$2" /sys/class/infiniband_mad && '
              'shift 2 && exec "$@"')
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(node_root / "sys/class/infiniband"),
                           str(mad), "ibstat", *args], capture_output=True, text=True, timeout=30,
                          env={"PATH": str(REAL.parent) + ":/usr/bin:/bin"})  # argv[0] "ibstat", as on a node


def _no_pid(text: str) -> str:
    return re.sub(r"\[\d+\]", "[PID]", text)


@pytest.mark.skipif(_oracle_reason() is not None, reason=_oracle_reason() or "")
@pytest.mark.parametrize("profile", ["dgx-h100", "gb200-nvl72"])
def test_emulated_ibstat_prints_what_the_real_ibstat_prints_over_the_same_sysfs(profile, make_node, tmp_path) -> None:
    node = make_node(profile)
    for args in FORMS + ERRORS:
        real = real_ibstat(node.dir / "root", tmp_path, *args)
        emu = node.run("ibstat", *args)
        assert (emu.returncode, emu.stdout, _no_pid(emu.stderr)) == \
            (real.returncode, real.stdout, _no_pid(real.stderr)), args
    assert node.run("ibstat", "-l").stdout.startswith("mlx5_0\n")  # not vacuous: both printed something
