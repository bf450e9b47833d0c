"""Optional prerequisites (issue 10.9): the not-run marker, the guard around a collector's argv, skipped-not-failed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fabricproof.judging import catalog, evaluate
from fabricproof import facts as facts_mod
from fabricproof.judging.baseline import load as load_baseline
from fabricproof.collectors import COLLECTORS
from fabricproof.collectors.base import (HOST_ROOT_ENV, NOT_RUN_EXIT, NOT_RUN_MARKER, Requires, guarded,
                                         not_run_line, not_run_reason, unguarded)
from fabricproof.model import CommandResult, ExitCode, Outcome
from fabricproof.paths import inventories_dir

CONFIG_REASON = "no /etc/fabricproof/nvfwupd.yaml: NVSwitch firmware not checked"

#: Every collector whose prerequisite may normally be absent: (kind, what). A missing nvidia-smi, ibstat or
#: systemctl on a GPU node is a fault, so those stay unguarded and fail the collection (ibstat feeds the core IB
#: checks; sminfo and perfquery ship with it in infiniband-diags, so their guard matters where it was split).
GUARDED = {
    "nvswitch_firmware": ("file", "/etc/fabricproof/nvfwupd.yaml"),
    "ofed_info": ("command", "ofed_info"),
    "show_gids": ("command", "show_gids"),
    "ibdev2netdev": ("command", "ibdev2netdev"),
    "sminfo": ("command", "sminfo"),
    "perfquery": ("command", "perfquery"),
    "mlxfwmanager": ("command", "mlxfwmanager"),
}


# ------------------------------------------------------------------------------------------------ the marker (pure)

@pytest.mark.parametrize(("code", "out", "reason"), [
    (75, f"{NOT_RUN_MARKER}{CONFIG_REASON}\n", CONFIG_REASON),
    (75, f"some banner\n{NOT_RUN_MARKER}the node is busy (3 jobs)\n", "the node is busy (3 jobs)"),
    (75, f"{NOT_RUN_MARKER}\n", "prerequisite absent"),
    (75, "EX_TEMPFAIL from the tool itself\n", None),  # a tool's own 75 is not a guard's
    (0, f"{NOT_RUN_MARKER}{CONFIG_REASON}\n", None),  # the marker in a tool's normal output is data
    (1, f"{NOT_RUN_MARKER}{CONFIG_REASON}\n", None),
    (75, f"  {NOT_RUN_MARKER}indented\n", None),
    (None, f"{NOT_RUN_MARKER}x\n", None),  # timed out
])
def test_not_run_reason_needs_both_the_exit_status_and_the_marker_line(code, out, reason) -> None:
    assert not_run_reason(code, out) == reason


def test_not_run_line_is_one_line_that_parses_back() -> None:
    line = not_run_line("idle guard:\n 2 jobs running")
    assert line == f"{NOT_RUN_MARKER}idle guard: 2 jobs running\n" and line.count("\n") == 1
    assert not_run_reason(NOT_RUN_EXIT, line) == "idle guard: 2 jobs running"


def test_guarded_argv_is_fixed_and_unwraps_to_the_tool_argv() -> None:
    req = Requires("file", "/etc/x.yaml", "X not checked")
    argv = guarded(req, "tool", "-c", "/etc/x.yaml", "show")
    assert argv[:2] == ("sh", "-c") and "/etc/x.yaml" not in argv[2]  # data is a positional argument, not script
    assert unguarded(argv) == ("tool", "-c", "/etc/x.yaml", "show")
    assert unguarded(("sh", "-c", "exec sminfo 2>&1")) == ("sh", "-c", "exec sminfo 2>&1")
    with pytest.raises(ValueError, match="unknown prerequisite kind"):
        guarded(Requires("socket", "/run/x", "y"), "tool")


def test_the_optional_collectors_are_guarded_and_the_essential_ones_are_not() -> None:
    actual = {cid: (c.requires.kind, c.requires.what) for cid, c in COLLECTORS.items() if c.requires}
    assert actual == GUARDED
    for cid in GUARDED:
        c = COLLECTORS[cid]
        assert c.argv == guarded(c.requires, *c.tool_argv)
        assert c.typical_s > 0  # its duration is still found, through its record in tools.TOOLS
    assert COLLECTORS["nvswitch_firmware"].requires.reason == CONFIG_REASON  # the wording
    assert COLLECTORS["nvswitch_firmware"].lock == "nvfwupd" and COLLECTORS["mlxfwmanager"].lock == "mlxfwmanager"
    assert COLLECTORS["flint"].lock == "mlxfwmanager"  # still serialised with mlxfwmanager on the host
    for essential in ("nvidia_smi_q", "ibstat", "fm_service", "ib_counters"):
        assert COLLECTORS[essential].requires is None


# ------------------------------------------------------------------------------------------ the guard under real sh

def _sh(argv: tuple[str, ...], root: Path, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, HOST_ROOT_ENV: str(root)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)


def test_a_file_guard_runs_the_tool_when_the_file_exists_and_declines_otherwise(tmp_path: Path) -> None:
    argv = guarded(Requires("file", "/etc/fabricproof/x.yaml", "X not checked"), "sh", "-c", 'echo ran "$@"; exit 4',
                   "sh", "a b", "'c'")
    r = _sh(argv, tmp_path)
    assert (r.returncode, r.stdout) == (NOT_RUN_EXIT, f"{NOT_RUN_MARKER}no /etc/fabricproof/x.yaml: X not checked\n")
    assert not_run_reason(r.returncode, r.stdout) == "no /etc/fabricproof/x.yaml: X not checked"
    (tmp_path / "etc" / "fabricproof").mkdir(parents=True)
    (tmp_path / "etc" / "fabricproof" / "x.yaml").write_text("BMC_IP: x\n")
    r = _sh(argv, tmp_path)
    assert (r.returncode, r.stdout) == (4, "ran a b 'c'\n")  # the tool's own status and argv, untouched


def test_a_command_guard_declines_when_the_tool_is_not_on_path(tmp_path: Path) -> None:
    c = COLLECTORS["ofed_info"]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sh").symlink_to("/bin/sh")  # a PATH with a shell and nothing else: no ofed_info
    r = _sh(c.argv, tmp_path, path=str(bindir))
    assert r.returncode == NOT_RUN_EXIT and not_run_reason(r.returncode, r.stdout) == c.requires.reason
    tool = bindir / "ofed_info"
    tool.write_text("#!/bin/sh\necho MLNX_OFED_LINUX-23.10-1.1.9.0:\n")
    tool.chmod(0o755)
    r = _sh(c.argv, tmp_path, path=str(bindir))
    assert (r.returncode, r.stdout) == (0, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n")


# --------------------------------------------------------------------------- facts and evaluation (pure)

def _declined(cid: str) -> CommandResult:
    c = COLLECTORS[cid]
    return CommandResult(c.argv, not_run_line(c.requires.reason), "", NOT_RUN_EXIT)


def test_a_declined_collector_is_skipped_with_its_reason_not_an_error() -> None:
    run, fragment = facts_mod.parse_output(COLLECTORS["nvswitch_firmware"], _declined("nvswitch_firmware"))
    assert fragment is None and run["status"] == "skipped" and run["error"] == CONFIG_REASON
    # the tool's own failure stays an error
    real = CommandResult(COLLECTORS["nvswitch_firmware"].argv, "", "Error: config file x not found\n", 1)
    run, _ = facts_mod.parse_output(COLLECTORS["nvswitch_firmware"], real)
    assert run["status"] == "error"


def test_checks_fed_only_by_a_declined_collector_skip_with_the_reason_and_the_run_passes() -> None:
    lab = Path(inventories_dir()) / "lab"
    doc = facts_mod.documents.load_json(lab / "facts" / "h100-0001.json").data
    doc["collectors"]["nvswitch_firmware"] = facts_mod.parse_output(
        COLLECTORS["nvswitch_firmware"], _declined("nvswitch_firmware"))[0]
    doc.get("nvswitch", {}).pop("firmware", None)
    checks = catalog.load()
    report = evaluate.evaluate({"h100-0001": doc}, load_baseline(lab / "baseline.yaml"), checks,
                               groups={"h100-0001": ("dgx_h100",)})
    fed = {c.id for c in checks if c.collector == "nvswitch_firmware"}
    assert fed >= {"nvswitch.firmware", "nvswitch.firmware_consistent"}
    mine = {r.check_id: r for r in report.results if r.check_id in fed}
    assert {r.outcome for r in mine.values()} == {Outcome.SKIP}, {k: (r.outcome, r.reason) for k, r in mine.items()}
    assert all(CONFIG_REASON in r.reason for r in mine.values())
    others = [r for r in report.results if r.check_id not in fed]
    assert others and not any(r.outcome in (Outcome.ERROR, Outcome.FAIL) for r in others)
    assert evaluate.exit_code(report) == ExitCode.OK
