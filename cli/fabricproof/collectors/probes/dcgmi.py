"""`dcgmi diag -r 1|2|3` tables of DCGM 3.x and 4.x: per test Pass/Fail/Skip/Warn; a diag that did not run fails."""

from __future__ import annotations

import re
from typing import Any

from ..base import ParseError
from ..fragments import array, boolean, choice, mapping, notes, obj, string
from .declare import probe_collector
from .text import lines_of

RESULTS = ("pass", "fail", "warn", "skip")
_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][A-Za-z ]*?)\s+-+[+|]")
_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>.*)\|\s*$")
_RESULT = re.compile(r"^(?P<result>Pass|Fail|Warn|Skip)\b(?:\s*-\s*(?P<detail>.*))?$", re.IGNORECASE)
_GPU = re.compile(r"^GPU\s*(?P<gpu>\d+)\s*:\s*(?P<result>Pass|Fail|Warn|Skip)\b", re.IGNORECASE)
_ERROR = re.compile(r"^\s*Error:\s*(?P<msg>.*\S)")
_META = {"DCGM Version": "dcgm_version", "Driver Version Detected": "driver_version"}
_MESSAGE_ROWS = ("Warning", "Info", "Error")
# The Deployment (software) tests check the installation; the others exercise the hardware, and the run level decides
# which of them run. The EUD test is a separately installed package that DCGM skips where it is absent, so its Skip
# leaves nothing unproven; any other Skip means the run did not test what its level asks for.
_DEPLOYMENT = ("deployment",)
_OPTIONAL = ("eud test", "eud")


def _join(chunks: list[str]) -> str:
    """A cell's text wrapped over rows: a chunk as long as the longest was cut mid-word (DCGM wraps at the cell
    width without a hyphen), a shorter one ended at a space."""
    width = max(len(c) for c in chunks)
    out = ""
    for n, chunk in enumerate(chunks):
        out += chunk if n == 0 or len(chunks[n - 1]) == width else " " + chunk
    return out


def _tests(lines: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    meta: dict[str, Any] = {"dcgm_version": None, "driver_version": None, "gpu_device_ids": []}
    tests: list[dict[str, Any]] = []
    category: str | None = None
    message: tuple[dict[str, Any], str, list[str]] | None = None  # (test, kind, chunks) being read

    def flush() -> None:
        nonlocal message
        if message:
            test, kind, chunks = message
            test["messages"].append(f"{kind}: {_join(chunks)}")
            message = None

    for line in lines:
        if m := _SECTION.match(line.strip()):
            flush()
            category = m["name"]
            continue
        m = _ROW.match(line.strip())
        if not m or set(line.strip()) <= set("+=-| "):
            continue
        name, value = m["name"].strip(), m["value"].strip()
        if name in ("Diagnostic",):
            continue
        if category == "Metadata" or name in _META or name == "GPU Device IDs Detected":
            if name == "GPU Device IDs Detected":
                meta["gpu_device_ids"] = [d.strip() for d in value.split(",") if d.strip()]
            elif name in _META:
                meta[_META[name]] = value
            continue
        if not name:  # a continuation row: a per-GPU result, or the next chunk of a wrapped message
            if message:
                message[2].append(value)
            elif tests and (g := _GPU.match(value)):
                tests[-1]["gpus"][g["gpu"]] = g["result"].lower()
            continue
        flush()
        if name in _MESSAGE_ROWS and tests:
            message = (tests[-1], name.lower(), [value])
            continue
        r = _RESULT.match(value)
        if not r:
            raise ParseError(f"test {name!r}: result {value[:60]!r} is not Pass/Fail/Warn/Skip")
        tests.append({"category": category, "name": name, "result": r["result"].lower(),
                      "detail": (r["detail"] or "").strip() or None, "gpus": {}, "messages": []})
    flush()
    return meta, tests


def _worst(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (category, test): a pasted table printed twice, or --iterations, keeps the worst result."""
    rank = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}
    kept: dict[tuple[Any, str], dict[str, Any]] = {}
    for t in tests:
        key = (t["category"], t["name"])
        if key not in kept or rank[t["result"]] > rank[kept[key]["result"]]:
            kept[key] = t
    return list(kept.values())


def _hardware(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tests that exercise the hardware and must run at the run's level (not Deployment, not optional EUD)."""
    return [t for t in tests if (t["category"] or "").lower() not in _DEPLOYMENT and t["name"].lower() not in _OPTIONAL]


def _skipped(hardware: list[dict[str, Any]]) -> list[str]:
    """The hardware tests that did not run: 'PCIe', or 'pcie (GPU1)' when one GPU skipped it."""
    skipped = []
    for t in hardware:
        if t["result"] == "skip":
            skipped.append(t["name"])
        else:
            skipped += [f"{t['name']} (GPU{gpu})" for gpu, result in t["gpus"].items() if result == "skip"]
    return skipped


def parse_dcgmi_diag(text: str) -> dict[str, Any]:
    if not text.strip():
        raise ParseError("empty dcgmi diag output")
    lines = lines_of(text)
    errors = [m["msg"] for line in lines if (m := _ERROR.match(line))]
    meta, tests = _tests(lines)
    if not tests:
        if errors:
            raise ParseError("dcgmi diag did not run: " + "; ".join(errors)[:300])
        raise ParseError("no dcgmi diag result table: not dcgmi diag output")
    tests = _worst(tests)
    failed = [t["name"] for t in tests if t["result"] in ("fail", "warn")]
    hardware = _hardware(tests)
    skipped = _skipped(hardware)
    noted = [f"not proven: {len(skipped)} of {len(hardware)} hardware tests skipped ({', '.join(skipped)})"] \
        if skipped else []
    return {**meta, "tests": tests, "passed": not failed and not errors and not skipped,
            "proven": None if skipped else True, "skipped_tests": skipped, "failed_tests": failed, "errors": errors,
            "notes": noted}


SCHEMA = obj(
    "One dcgmi diag run: metadata and each test's result.",
    {
        "dcgm_version": string("DCGM Version.", True),
        "driver_version": string("Driver Version Detected.", True),
        "gpu_device_ids": array("GPU Device IDs Detected (PCI device ids, e.g. 20b2).", string("Device id.")),
        "tests": array("Each test in table order (one entry per test: a table printed twice keeps the worst).", obj(
            "One test.",
            {
                "category": string("Section: Deployment, Integration, Hardware, Stress (null outside one).", True),
                "name": string("Test name as printed (DCGM 4 prints lower case: software, pcie, memory)."),
                "result": choice("pass, fail, warn or skip.", RESULTS),
                "detail": string("What follows the result, e.g. 'All' in 'Pass - All'.", True),
                "gpus": mapping("Per-GPU results of DCGM 4's 'GPU0: Pass' rows.", choice("Result.", RESULTS)),
                "messages": array("Warning/Info rows of the test, unwrapped.", string("'warning: <text>'.")),
            },
        )),
        "passed": boolean("Every test the level requires ran, none failed or warned, and dcgmi reported no error."),
        "proven": boolean("True when every hardware test the run's level asks for ran on every GPU (the EUD test, "
                          "a separate package, aside); null when some were skipped: not proven, skipped_tests "
                          "names them.", True),
        "skipped_tests": array("Hardware tests the level asks for that said Skip ('pcie (GPU1)': on one GPU).",
                               string("Test name.")),
        "failed_tests": array("Names of tests that failed or warned.", string("Test name.")),
        "errors": array("'Error:' lines dcgmi printed next to the table.", string("Message.")),
        "notes": notes(),
    },
    optional=("proven", "skipped_tests", "notes"),
)

COLLECTORS = (
    # It stresses GPUs, memory and PCIe/NVLink for minutes; level 2 lasts about 2 minutes (spec.dcgm_timeout_s
    # scales the timeout with the level a baseline sets).
    probe_collector("dcgm_diag", ("dcgmi", "diag", "-r", "2"), parse_dcgmi_diag, SCHEMA,
                    "DCGM active diagnostics, per test Pass/Fail/Skip/Warn (dcgmi diag -r 2).", 600.0, "dcgmi"),
)
