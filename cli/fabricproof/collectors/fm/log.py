"""fabricmanager.log and the nvidia-fabricmanager journal (same lines): version mismatch, NVSwitch errors, restarts."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, read_host_file
from ..fragments import array, boolean, integer, obj, string
from ..textutil import strip_ansi
from .platforms import FM_PLATFORMS

_FM_LOG_LINE = re.compile(r"^\[\w{3} +\d{1,2} \d{4} \d{2}:\d{2}:\d{2}\] \[[A-Z]+\]")
_FM_WORDS = re.compile(r"fabric ?manager|nvswitch|NV_WARN_|nv-fabricmanager", re.IGNORECASE)
_JOURNAL_MARKER = re.compile(r"^-- .* --$")
_VERSION_NUM = r"(\d+(?:\.\d+)+)"
# FM 530: "... driver interface version 530.30.02 don't match with driver version 530.41.03."
# newer builds say "doesn't match".
_MISMATCH = re.compile(
    rf"version\s+{_VERSION_NUM}\s+(?:don'?t|doesn'?t|do not|does not|is not)\s+match(?:ing)?\s+with\s+"
    rf"(?:the\s+)?(?:current\s+)?(?:GPU\s+)?driver\s+version\s+{_VERSION_NUM}",
    re.IGNORECASE,
)
_NVSW_ERROR = re.compile(r"detected NVSwitch (fatal|non-fatal) error (\d+)", re.IGNORECASE)
_NVSW_BDF = re.compile(r"pci bus id\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])", re.IGNORECASE)
_NVSW_PORT = re.compile(r"\bport\s+(\d+)", re.IGNORECASE)
_UNKNOWN_OPTION = re.compile(r"Unknown option:\s*(.*)$")
_INVALID_ITEM = re.compile(r"config file item:\s*(\S+)\s+has an invalid value", re.IGNORECASE)
_RUNNING = re.compile(r"Fabric Manager version\s+(\S+)\s+is running", re.IGNORECASE)
_STARTING = re.compile(r"Starting (?:nvidia-fabricmanager|NVIDIA fabric manager)", re.IGNORECASE)
_DUMP_START = "dumping all the detected NVSwitch information"
_INVENTORY = re.compile(
    r"Index:\s*(\d+)\s+Physical Id:\s*(\d+)\s+PCI Bus ID:\s*(\S+)\s+Enabled Link Mask:\s*(\S+)"
    r"\s+Arch Type:\s*(\d+)\s+UUID\s*:\s*(\S+)"
)
_CONFIGURED = "Successfully configured all the available NVSwitches"


_STARTED_OK = re.compile(r"\bStarted\b.*fabric ?manager", re.IGNORECASE)


def _may_match(folded: str | None, word: str) -> bool:
    """Whether a line can hold `word` (lower case), the literal part every match of a pattern contains.

    folded is the lower-cased line when it is ASCII: there an IGNORECASE pattern matches only where its words
    appear, so the ~10 regex searches per line are skipped for the many lines without them. A non-ASCII line
    (folded None) always goes to the patterns: their Unicode case folding (e.g. 'ı' matches 'i') is not str.lower().
    """
    return folded is None or word in folded


def parse_fm_log(text: str) -> dict[str, Any]:
    """Evidence from /var/log/fabricmanager.log or the nvidia-fabricmanager journal (same lines).

    startups counts FM launches: the "Fabric Manager version X is running" banner (log file) or
    a "Starting ... fabric manager" line (systemd, start script); with syslog enabled both can
    appear for one launch, so the larger count is reported, not the sum.
    """
    lines = strip_ansi(text).replace("\r", "").split("\n")
    content = [line for line in lines if line.strip() and not _JOURNAL_MARKER.match(line.strip())]
    recognised = any(_FM_LOG_LINE.match(line) or _FM_WORDS.search(line) for line in content)
    if not recognised and not any(_JOURNAL_MARKER.match(line.strip()) for line in lines):
        raise ParseError("not Fabric Manager log or journal output")

    mismatch: dict[str, str] | None = None
    errors: list[dict[str, Any]] = []
    invalid: list[str] = []
    unknown_value: str | None = None
    unknown = nothing_to_do = configured = False
    running = starting = 0
    running_version: str | None = None
    inventory: list[dict[str, Any]] = []
    for line in content:
        folded = line.lower() if line.isascii() else None
        run = _RUNNING.search(line) if _may_match(folded, "is running") else None
        if _may_match(folded, "match") and (m := _MISMATCH.search(line)):
            mismatch = {"fm_version": m.group(1), "driver_version": m.group(2)}  # the latest one wins
        elif run or (_may_match(folded, "started") and _STARTED_OK.search(line)):
            mismatch = None  # a later successful start means the mismatch was fixed in this boot
        if _may_match(folded, "detected nvswitch ") and (m := _NVSW_ERROR.search(line)):
            bdf, port = _NVSW_BDF.search(line), _NVSW_PORT.search(line[m.end() :])
            errors.append(
                {
                    "fatal": m.group(1).lower() == "fatal",
                    "code": int(m.group(2)),
                    "bdf": bdf.group(1) if bdf else None,
                    "port": int(port.group(1)) if port else None,
                    "line": line.strip(),
                }
            )
        if "NV_WARN_NOTHING_TO_DO" in line:
            nothing_to_do = True
        if "Unknown option:" in line and (m := _UNKNOWN_OPTION.search(line)):
            unknown, unknown_value = True, m.group(1).strip() or None
        if _may_match(folded, "config file item:") and (m := _INVALID_ITEM.search(line)) and m.group(1) not in invalid:
            invalid.append(m.group(1))
        if run:
            running += 1
            running_version = run.group(1)
        elif _may_match(folded, "starting ") and _STARTING.search(line):
            starting += 1
        if _DUMP_START in line:
            inventory = []  # keep the inventory of the latest start only
        elif "Index:" in line and (m := _INVENTORY.search(line)):
            inventory.append(
                {
                    "index": int(m.group(1)),
                    "physical_id": int(m.group(2)),
                    "bdf": m.group(3),
                    "enabled_link_mask": m.group(4),
                    "arch_type": int(m.group(5)),
                    "uuid": m.group(6),
                }
            )
        if _CONFIGURED in line:
            configured = True
    return {
        "lines": len(content),
        "version_mismatch": mismatch,
        "nvswitch_errors": errors,
        "nvswitch_fatal_count": sum(1 for e in errors if e["fatal"]),
        "nvswitch_nonfatal_count": sum(1 for e in errors if not e["fatal"]),
        "nothing_to_do": nothing_to_do,
        "unknown_option": unknown,
        "unknown_option_value": unknown_value,
        "invalid_config_items": invalid,
        "startups": max(running, starting),
        "running_version": running_version,
        "nvswitches": inventory,
        "switches_configured": configured,
    }


FM_LOG_SCHEMA: dict[str, Any] = obj(
    "Fabric Manager failure evidence from its log file or journal.",
    {
        "lines": integer("Number of non-empty log lines read."),
        "version_mismatch": obj(
            "FM/driver version mismatch reported by FM (the latest one), or null.",
            {
                "fm_version": string("FM's driver interface version."),
                "driver_version": string("Loaded driver version."),
            },
            nullable=True,
        ),
        "nvswitch_errors": array(
            "'detected NVSwitch fatal/non-fatal error N' lines.",
            obj(
                "One NVSwitch error report.",
                {
                    "fatal": boolean("Reported as fatal."),
                    "code": integer("SXid error code."),
                    "bdf": string("NVSwitch PCI bus id.", True),
                    "port": integer("NVSwitch port.", True),
                    "line": string("The log line."),
                },
            ),
        ),
        "nvswitch_fatal_count": integer("Fatal NVSwitch error lines."),
        "nvswitch_nonfatal_count": integer("Non-fatal NVSwitch error lines."),
        "nothing_to_do": boolean("NV_WARN_NOTHING_TO_DO: FM found no NVSwitch to manage."),
        "unknown_option": boolean(
            "The start script rejected an option ('Unknown option:'), as after the 570.158 script change."
        ),
        "unknown_option_value": string("The rejected option.", True),
        "invalid_config_items": array(
            "Config items FM reported as having an invalid value.", string("Config item name.")
        ),
        "startups": integer("FM launches seen."),
        "running_version": string("Version in the latest 'Fabric Manager version X is running' banner.", True),
        "nvswitches": array(
            "NVSwitch inventory dumped by FM at its latest start.",
            obj(
                "One detected NVSwitch.",
                {
                    "index": integer("FM index."),
                    "physical_id": integer("Physical id."),
                    "bdf": string("PCI bus id."),
                    "enabled_link_mask": string("Enabled link mask (hex)."),
                    "arch_type": integer("NVSwitch architecture type."),
                    "uuid": string("NVSwitch UUID (SWX-...)."),
                },
            ),
        ),
        "switches_configured": boolean("FM logged 'Successfully configured all the available NVSwitches'."),
    },
)

FM_LOG = Collector(
    id="fm_log",
    argv=read_host_file("/var/log/fabricmanager.log", "tail", "-n", "5000"),
    parse=parse_fm_log,
    provides="/fm/log",
    schema=FM_LOG_SCHEMA,
    family="fm",
    description="Fabric Manager log: version mismatch, NVSwitch errors, config problems, restarts.",
    platforms=FM_PLATFORMS,
    corpus=("fabricmanager", "nvswitch"),
)

FM_JOURNAL = Collector(
    id="fm_journal",
    argv=tools.argv("fm_journal"),
    parse=parse_fm_log,
    provides="/fm/journal",
    schema=FM_LOG_SCHEMA,
    family="fm",
    description="nvidia-fabricmanager journal since boot: start failures and their reasons.",
    platforms=FM_PLATFORMS,
    corpus=("fabricmanager",),
)

COLLECTORS = (FM_LOG, FM_JOURNAL)
