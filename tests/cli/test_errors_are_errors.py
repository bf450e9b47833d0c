"""Errors are errors (issue 19.7): each input below was a traceback or a wrong message; now each is one line on stderr
naming the input, exit 2, and nothing written anywhere (the run directories, the host locks)."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from .helpers import REPO, run

PLANS = REPO / "inventories" / "lab" / "plans"

#: A state.json that is not what fabricproof wrote: a list, null, and an object short of most fields.
BAD_STATES = {"list": "[]\n", "null": "null\n",
              "short": json.dumps({"apiVersion": "fabricproof/v1", "kind": "RolloutState", "run_id": "r1",
                                   "status": "halted"}) + "\n"}
STATE_COMMANDS = {"status": ["rollout", "status", "r1"], "status-html": ["rollout", "status", "r1", "-f", "html"],
                  "resume": ["rollout", "resume", "r1"], "abort": ["rollout", "abort", "r1"],
                  "rollback": ["rollback", "r1"]}
STATE_NEEDLES = {"list": "state.json:1: at / not a rollout state: the file holds a list, not an object",
                 "null": "state.json:1: at / not a rollout state: the file holds null, not an object",
                 "short": "state.json:1: at / 'plan', 'plan_file', 'inventory'"}


def snapshot(*roots: Path) -> dict[str, bytes | None]:
    """Every file and directory under roots, with the bytes of the files: 'nothing changed' is this, equal."""
    out: dict[str, bytes | None] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_symlink() or stat.S_ISREG(path.lstat().st_mode):
                out[str(path)] = path.read_bytes() if not path.is_symlink() else os.readlink(path).encode()
            else:
                out[str(path)] = None
    return out


@pytest.fixture
def world(tmp_path: Path, private_state_dir: Path) -> dict[str, Path]:
    """An inventory nobody can be reached through (port 9), a valid plan for it, and an empty runs directory."""
    inv = tmp_path / "inv.yml"
    # The lab baseline's other groups exist, empty: a baseline naming a group the inventory lacks is refused.
    inv.write_text("all:\n  children:\n    dgx_a100:\n    hgx_h200:\n    gb200_nvl72:\n    dgx_h100:\n      hosts:\n"
                   + "".join(f"        h100-000{i}: {{ansible_host: 127.0.0.1, ansible_port: 9}}\n" for i in (1, 2, 3)))
    runs = tmp_path / "runs"
    runs.mkdir()
    return {"tmp": tmp_path, "inv": inv, "runs": runs, "state": private_state_dir}


def plan_with(world: dict[str, Path], edit: Callable[[dict], None]) -> Path:
    """The shipped driver upgrade plan, its baselines by absolute path, with `edit` applied (block style: a wave's
    size and batch each on a line of their own)."""
    doc = yaml.safe_load((PLANS / "driver-fm-upgrade.yml").read_text())
    doc["spec"]["baseline"] = {k: str((PLANS / v).resolve()) for k, v in doc["spec"]["baseline"].items()}
    doc["spec"]["inventory"] = str(world["inv"])
    edit(doc)
    path = world["tmp"] / "plan.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))
    return path


def line_of(path: Path, needle: str, nth: int = 0) -> int:
    """The line of the nth occurrence of needle (0: the first)."""
    return [i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text][nth]


def wave(index: int, **fields: object) -> Callable[[dict], None]:
    return lambda doc: doc["spec"]["waves"][index].update(fields)


SIZE_SAYS = "is not allowed: a wave size is a whole number of units, at least 1; a percentage above 0% and at most 100%"
BATCH_SAYS = "is not allowed: a wave batch is a whole number of units, at least 1; or a percentage of the wave above 0%"


def _wave_cases() -> list:
    table = [(0, "size", f"size 0 {SIZE_SAYS}"), ("150%", "size", f"size '150%' {SIZE_SAYS}"),
             ("nan%", "size", f"size 'nan%' {SIZE_SAYS}"), ("0%", "size", f"size '0%' {SIZE_SAYS}"),
             (0, "batch", f"batch 0 {BATCH_SAYS}"), ("150%", "batch", f"batch '150%' {BATCH_SAYS}")]
    cases = []
    for value, key, says in table:
        def make(world, value=value, key=key, says=says):
            plan = plan_with(world, wave(1, **{key: value}))
            at = line_of(plan, f"{key}: ", 1 if key == "size" else 0)  # the second wave's (no other has a batch)
            needle = f"{plan}:{at}: at /spec/waves/1/{key} {says}"
            return ["rollout", "run", plan, "--runs-dir", world["runs"]], needle
        cases.append(pytest.param(make, id=f"wave-{key}-{value}"))
    return cases


def _state_cases() -> list:
    cases = []
    for content, text in BAD_STATES.items():
        for name, args in STATE_COMMANDS.items():
            def make(world, text=text, args=args, content=content):
                (world["runs"] / "r1").mkdir()
                (world["runs"] / "r1" / "state.json").write_text(text)
                return [*args, "--runs-dir", world["runs"]], str(world["runs"] / "r1" / STATE_NEEDLES[content])
            cases.append(pytest.param(make, id=f"state-{content}-{name}"))
    return cases


def _plan_in_a_pipe(world):
    """rollout run on a pipe (what /dev/stdin is under `cat plan | fabricproof rollout run /dev/stdin`): a writer
    stands by and hands the plan to every reader that opens it, so a reader gets a plan rather than hanging."""
    fifo = world["tmp"] / "plan.fifo"
    os.mkfifo(fifo)
    text = plan_with(world, lambda doc: None).read_bytes()
    world["stop"] = threading.Event()

    def feed() -> None:
        while not world["stop"].wait(0.05):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:  # no reader yet
                assert exc.errno == errno.ENXIO
                continue
            os.write(fd, text)
            os.close(fd)

    world["feeder"] = threading.Thread(target=feed, daemon=True)
    world["feeder"].start()
    return ["rollout", "run", fifo, "--runs-dir", world["runs"]], f"error: {fifo}: is a pipe, not a regular file: "


def _plan_on_a_device(world):
    device = world["tmp"] / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null
    return (["rollout", "run", device, "--runs-dir", world["runs"]],
            f"error: {device}: is a character device, not a regular file: ")


def _baseline_of_zeros(world):
    zero = world["tmp"] / "zero"
    os.mknod(zero, 0o444 | stat.S_IFCHR, os.makedev(1, 5))  # a private /dev/zero: endless, never read whole
    return ["baseline", "lint", zero], f"error: {zero}: the document is larger than 8 MiB"


def _bad_limit_regex(world):
    out = world["tmp"] / "run"
    return (["collect", "-i", world["inv"], "-o", out, "--limit", "~h100-000["],
            "--limit '~h100-000[': '~h100-000[' is not a valid regular expression (unterminated character set")


def _bad_target_regex(world):
    plan = plan_with(world, lambda doc: doc["spec"].update(target="~h100-000["))
    return (["rollout", "plan", plan], f"{plan}:{line_of(plan, 'target:')}: at /spec/target target '~h100-000[' in "
                                       f"{world['inv']}: '~h100-000[' is not a valid regular expression")


CASES = [*_state_cases(), *_wave_cases(),
         pytest.param(_plan_in_a_pipe, id="rollout-run-pipe"), pytest.param(_plan_on_a_device, id="rollout-run-device"),
         pytest.param(_baseline_of_zeros, id="baseline-lint-zero"), pytest.param(_bad_limit_regex, id="limit-regex"),
         pytest.param(_bad_target_regex, id="plan-target-regex")]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(world, case):
    args, needle = case(world)
    before = snapshot(world["tmp"], world["state"])
    try:
        res = run(*args)
    finally:
        if "stop" in world:
            world["stop"].set()
            world["feeder"].join(10)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert snapshot(world["tmp"], world["state"]) == before
