"""collect, drift and check commands: bad input exits 2 before any host is touched; drift and progress output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from fabricproof.collect import HostProgress
from fabricproof.commands import check as check_cmd
from fabricproof.commands import collect as collect_cmd
from fabricproof.commands._progress import ProgressView

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "inventories" / "lab" / "baseline.yaml"

# The commands as the lead registers them in cli.py (built here so these tests do not depend on that wiring).
app = typer.Typer()
app.command("collect")(collect_cmd.collect)
app.command("drift")(collect_cmd.drift)
app.command("check")(check_cmd.check)


def run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "inv.yml"
    # Port 9 on loopback: nothing may be contacted by these tests, and nothing listens there anyway.
    inv.write_text("all:\n  children:\n    gpu:\n      hosts:\n        n1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    return inv


@pytest.mark.parametrize("args, needle", [
    (["--via", "ssh"], "needs --inventory"),
    (["--via", "telnet"], "--via 'telnet'"),
    (["--forks", "0"], "--forks must be at least 1"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--collectors", "nope_*"], "matches no collector"),
    (["--format", "xml"], "--format 'xml'"),
    (["--host-timeout", "0"], "must be positive"),
])
def test_collect_bad_options_exit_2_and_create_nothing(tmp_path, args, needle):
    out = tmp_path / "run"
    res = run("collect", "-o", out, *args)
    assert res.exit_code == 2, res.output
    assert needle in res.stderr
    assert not out.exists()


def test_collect_bad_inventory_and_limit_exit_2_before_any_host(tmp_path, inventory):
    res = run("collect", "-i", tmp_path / "missing.yml", "-o", tmp_path / "r1")
    assert res.exit_code == 2 and "inventory not found" in res.stderr
    res = run("collect", "-i", inventory, "--limit", "no_such_group", "-o", tmp_path / "r2")
    assert res.exit_code == 2 and "no host or group named no_such_group" in res.stderr
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


def test_collect_refuses_a_run_directory_that_holds_a_run(tmp_path, inventory):
    out = tmp_path / "run"
    (out / "facts").mkdir(parents=True)
    res = run("collect", "-i", inventory, "-o", out)
    assert res.exit_code == 2 and "already holds a collection run" in res.stderr


def _facts(directory: Path, host: str, driver: str, crc: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": host, "collectors": {},
           "gpu": {"count": 0, "driver_version": driver, "cuda_version": None, "gpus": []},
           "nvlink": {"errors": {"links": [{"gpu": 0, "link": 1, "replay": 0, "recovery": 0, "crc_flit": None,
                                            "crc_data": None, "crc": crc}],
                                 "totals": {"replay": 0, "recovery": 0, "crc": crc}}}}
    (directory / f"{host}.json").write_text(json.dumps(doc))


def test_drift_no_change_exit_0_change_exit_1_json(tmp_path):
    _facts(tmp_path / "a", "n1", "535.161.08", 5)
    _facts(tmp_path / "b", "n1", "535.161.08", 5)
    res = run("drift", tmp_path / "a", tmp_path / "b")
    assert res.exit_code == 0 and "0 change(s)" in res.stdout
    _facts(tmp_path / "c", "n1", "550.54.15", 9)
    res = run("drift", tmp_path / "a", tmp_path / "c", "--format", "json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["hosts_compared"] == 1
    assert {(c["what"], c["before"], c["after"]) for c in doc["changes"]} == {
        ("driver", "535.161.08", "550.54.15"), ("NVLink GPU 0 link 1 crc", 5, 9)}
    res = run("drift", tmp_path / "a", tmp_path / "c")
    assert res.exit_code == 1 and "550.54.15" in res.stdout and "+4" in res.stdout


def test_drift_bad_input_exit_2(tmp_path):
    _facts(tmp_path / "a", "n1", "1", 0)
    assert run("drift", tmp_path / "a", tmp_path / "nope").exit_code == 2
    assert run("drift", tmp_path / "a", tmp_path / "a", "--format", "yaml").exit_code == 2


@pytest.mark.parametrize("args, needle", [
    ([], "pass --local"),
    (["--local", "--fail-on", "fatal"], "--fail-on 'fatal'"),
    (["--local", "--format", "csv"], "--format 'csv'"),
    (["--local", "--output", "x.prom"], "--output needs a report --format"),
    (["--local", "-f", "nhc=x.txt"], "--output needs a report --format"),
    (["--local", "-f", "prometheus=a.prom", "-o", "b.prom"], "give the file once"),
    (["--local", "-f", "prometheus="], "no file after '='"),
])
def test_check_bad_input_exit_2(args, needle):
    res = run("check", "-b", BASELINE, *args)
    assert res.exit_code == 2 and needle in res.stderr


def test_check_missing_baseline_exit_2(tmp_path):
    res = run("check", "--local", "-b", tmp_path / "none.yaml")
    assert res.exit_code == 2


def _event(done: int, status: str = "ok", host: str = "h", failed: int = 0, total: int = 20) -> HostProgress:
    return HostProgress(host=host, status=status, message="unreachable: connection refused" if status == "failed" else "",
                        done=done, failed=failed, partial=0, total=total, elapsed_s=done * 0.5)


def test_plain_progress_prints_failures_and_a_status_line_every_tenth():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200)
    with ProgressView(console, 20) as view:
        for k in range(1, 21):
            view(_event(k, "failed" if k == 7 else "ok", host=f"h{k}", failed=int(k >= 7)))
    lines = buf.getvalue().splitlines()
    assert "h7: not collected: unreachable: connection refused" in lines
    status = [ln for ln in lines if ln.startswith("collect: ")]
    assert len(status) == 10 and status[-1].startswith("collect: 20/20 hosts, 1 not collected")


def test_quiet_progress_prints_nothing():
    buf = io.StringIO()
    with ProgressView(Console(file=buf, force_terminal=False), 2, quiet=True) as view:
        view(_event(1, "failed", failed=1, total=2))
    assert buf.getvalue() == ""


def test_terminal_progress_draws_a_bar_and_keeps_failures_on_screen():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with ProgressView(console, 2) as view:
        view(_event(1, "failed", host="bad-1", failed=1, total=2))
        view(_event(2, total=2, failed=1))
    text = buf.getvalue()
    assert "bad-1: not collected" in text and "not collected" in text and "hosts/s" in text
