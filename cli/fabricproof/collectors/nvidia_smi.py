"""GPU inventory, fabric state and driver facts: nvidia-smi -q / -q -x / --query-gpu, /proc/driver/nvidia/version."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any
from xml.etree.ElementTree import Element
from xml.etree.ElementTree import ParseError as XMLSyntaxError

import defusedxml.ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from .base import Collector, ParseError, read_host_file
from .fragments import array, boolean, integer, number, obj, string
from .textutil import Node, first_line, indent_tree, strip_ansi, to_float, to_int

# Clock event (formerly "throttle") reasons in NVML bit order; the CSV reports them as a hex mask.
THROTTLE_BITS: tuple[tuple[str, int], ...] = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clocks_setting", 0x100),
)
THROTTLE_NAMES = tuple(name for name, _ in THROTTLE_BITS)

# -q prints the reasons as titles; the XML and CSV already use the snake names.
_Q_REASONS = {
    "idle": "gpu_idle",
    "gpu idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clocks_setting",
    "display clocks setting": "display_clocks_setting",
}

HEALTH_KEYS = (
    "summary",
    "bandwidth",
    "route_recovery_in_progress",
    "route_unhealthy",
    "access_timeout_recovery",
    "incorrect_configuration",
    "partition_assigned",
)

# nvidia-smi spells "no value" in several ways; "None" is NOT among them (it is a real state,
# e.g. health.incorrect_configuration "None" means no misconfiguration was found), which is why string
# fields go through _na rather than textutil.na_to_none. Numbers use to_int/to_float directly: no missing
# spelling starts with a digit, so both read the same.
_MISSING = {"", "N/A", "NA", "REQUESTED FUNCTIONALITY HAS BEEN DEPRECATED", "NOT SUPPORTED", "UNKNOWN ERROR"}


def _na(value: str | None) -> str | None:
    """Printed value, or None for N/A, [N/A], [Not Supported], [Requested functionality ...]."""
    if value is None:
        return None
    v = value.strip()
    if v.startswith("[") and v.endswith("]"):
        return None
    return None if v.upper() in _MISSING else v


def _mode(value: str | None) -> str | None:
    v = (_na(value) or "").lower()
    return {"enabled": "Enabled", "disabled": "Disabled"}.get(v)


def _yes_no(value: str | None) -> bool | None:
    v = (_na(value) or "").lower()
    return {"yes": True, "true": True, "no": False, "false": False}.get(v)


def _ordered_reasons(active: Iterable[str]) -> list[str]:
    found = set(active)
    return [name for name in THROTTLE_NAMES if name in found]


def _remapped(pending: bool | None, failure: bool | None, uncorrectable: int | None) -> dict[str, Any] | None:
    if pending is None and failure is None and uncorrectable is None:
        return None  # pre-Ampere boards and MIG-mode views have no row remapper data
    return {"pending": pending, "failure": failure, "uncorrectable": uncorrectable}


def _fabric(
    state: str | None = None,
    status: str | None = None,
    clique_id: int | None = None,
    cluster_uuid: str | None = None,
    health: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    health = health or {}
    return {
        "state": state,
        "status": status,
        "clique_id": clique_id,
        "cluster_uuid": cluster_uuid,
        "health": {k: health.get(k) for k in HEALTH_KEYS},
    }


def _gpu(index: int, **fields: Any) -> dict[str, Any]:
    """One GPU record with every key present, so all three front-ends emit the same shape."""
    record: dict[str, Any] = {
        "index": index,
        "name": None,
        "uuid": None,
        "bus_id": None,
        "vbios": None,
        "architecture": None,
        "persistence_mode": None,
        "ecc_mode": None,
        "mig_mode": None,
        "mig_devices": None,
        "power_limit_w": None,
        "throttle_reasons": [],
        "pcie_gen": None,
        "pcie_width": None,
        "remapped_rows": None,
        "fabric": _fabric(),
    }
    unknown = set(fields) - set(record)
    if unknown:
        raise TypeError(f"unknown GPU fields {sorted(unknown)}")
    record.update(fields)
    return record


def _fragment(
    gpus: list[dict[str, Any]],
    driver_version: str | None,
    cuda_version: str | None,
    attached_gpus: int | None,
    notes: list[str],
) -> dict[str, Any]:
    if attached_gpus is not None and attached_gpus != len(gpus):
        notes.append(f"tool reports {attached_gpus} attached GPUs but lists {len(gpus)}")
    return {
        "count": len(gpus),
        "attached_gpus": attached_gpus,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "gpus": gpus,
        "notes": notes,
    }


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q (text)

# A "GPU 00000000:19:00.0" line, searched for in the whole text at once: lines are joined with "\n" only, so
# [^\S\n] is the whitespace of one line. The pattern starts with the literal "\nGPU" (not "^GPU") because the
# regex engine skips ahead to a literal prefix; "^" in MULTILINE mode is tried at every character (15x slower).
_GPU_HEADER = re.compile(
    r"\nGPU[^\S\n]+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])[^\S\n]*$", re.MULTILINE
)
# Line breaks str.splitlines() knows besides "\n" (indent_tree splits there, the "\n"-based regex would not).
_OTHER_LINE_BREAKS = ("\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")

# Section titles that only a GPU body of -q contains: used to accept an excerpt without a header.
_GPU_BODY_KEYS = {
    "product name",
    "gpu uuid",
    "vbios version",
    "persistence mode",
    "fabric",
    "pci",
    "clocks event reasons",
    "clocks throttle reasons",
    "remapped rows",
    "retired pages",
    "ecc mode",
}


def _find(node: Node | None, *path: str) -> Node | None:
    """First child with the title, case-insensitive (older drivers print 'Ecc Mode', newer 'ECC Mode')."""
    for key in path:
        if node is None:
            return None
        want = key.lower()
        for child in node.children:
            if child.key.lower() == want:
                node = child
                break
        else:
            return None
    return node


def _value(node: Node | None, *path: str) -> str | None:
    found = _find(node, *path)
    return found.value if found else None


# The first line with text, and its leading spaces. Like every pattern run over a whole body, it starts with
# the literal "\n" (bodies start with one) so the regex engine jumps from line to line.
_FIRST_TEXT_LINE = re.compile(r"\n( *)[^\S\n]*\S")


@lru_cache(maxsize=32)
def _line_at(indent: int) -> re.Pattern[str]:
    """A line with exactly `indent` leading spaces (blank ones too); group 1 is the rest of the line."""
    return re.compile(r"\n" + " " * indent + r"(?! )([^\n]*)")


@lru_cache(maxsize=32)
def _text_line_before(indent: int) -> re.Pattern[str]:
    """A line with text and fewer than `indent` leading spaces (a line not starting with `indent` spaces)."""
    return re.compile(r"\n(?!" + " " * indent + r")[^\S\n]*\S")


class _Body:
    """One GPU's lines after its header, parsed as far as _q_gpu looks (~10 of its ~60 sections).

    find/value answer exactly what _find/_value answer on indent_tree(body): the first top-level line with
    the title (case-insensitive), then _find below it. Every top-level line is read, but the lines under
    one become Nodes only when its section is looked up: most of nvidia-smi -q (clocks, temperatures, ECC
    counters, processes...) is never read.
    """

    __slots__ = ("first", "pending", "titles")

    def __init__(self) -> None:
        self.titles: list[str] = []  # lower-cased title of every top-level line, in order
        self.first: dict[str, Node] = {}  # lower-cased title -> its first top-level line
        # title -> the lines under its first top-level line (in pieces), parsed when the title is looked up
        self.pending: dict[str, list[str]] = {}

    @classmethod
    def of_node(cls, node: Node) -> _Body:
        """A body already parsed into a tree (a headerless excerpt, irregular indentation)."""
        body = cls()
        for child in node.children:
            title = child.key.lower()
            body.titles.append(title)
            body.first.setdefault(title, child)
        return body

    @classmethod
    def of_text(cls, text: str) -> _Body:
        """A body as text that starts with a line break, with TABs expanded and only "\\n" line breaks.

        A line's parent is the nearest earlier line indented less, so when no line is indented less than
        the first, the top-level lines are exactly those indented like the first, and the lines between
        two of them are the first one's subtree. Otherwise the whole body is parsed by indent_tree.
        """
        first = _FIRST_TEXT_LINE.search(text)
        if first is None:
            return cls()
        indent = len(first[1])
        if indent and _text_line_before(indent).search(text, first.end()):
            return cls.of_node(indent_tree(text))
        body = cls()
        # split() with one group alternates: [before the first top-level line, its text, the lines under it,
        # the next top-level text, the lines under it, ...]; the text before is blank (see first).
        parts = _line_at(indent).split(text)
        under: list[str] = []  # the lines under the current top-level line
        for line, lines in zip(parts[1::2], parts[2::2]):
            line = line.rstrip()
            if not line:  # a blank line that happens to carry `indent` spaces: part of the lines above
                under.append(lines)
                continue
            # indent_tree's reading of one line (see textutil), for the top-level lines only
            key, colon, value = line.partition(":")
            node = Node(key.strip(), (value.strip() or None) if colon else None, indent)
            title = node.key.lower()
            body.titles.append(title)
            if title in body.first:
                under = []  # a later duplicate is never looked up
                continue
            body.first[title] = node
            under = body.pending[title] = [lines]
        return body

    def find(self, key: str, *path: str) -> Node | None:
        title = key.lower()
        if title in self.pending:  # the first lookup of this section: parse the lines under it now
            self.first[title].children = indent_tree("".join(self.pending.pop(title))).children
        found = self.first.get(title)
        return _find(found, *path) if path and found is not None else found

    def value(self, key: str, *path: str) -> str | None:
        found = self.find(key, *path)
        return found.value if found else None


def _walk(node: Node) -> Iterator[Node]:
    for child in node.children:
        yield child
        yield from _walk(child)


def _q_reasons(body: _Body) -> list[str]:
    block = body.find("Clocks Event Reasons") or body.find("Clocks Throttle Reasons")
    if block is None:
        return []
    # HW Thermal / HW Power Brake Slowdown are printed nested under HW Slowdown.
    active = (_Q_REASONS.get(n.key.lower()) for n in _walk(block) if (n.value or "").strip() == "Active")
    return _ordered_reasons(r for r in active if r)


def _q_power_limit(body: _Body) -> float | None:
    for section, key in (
        ("GPU Power Readings", "Current Power Limit"),
        ("Power Readings", "Current Power Limit"),
        ("Power Readings", "Enforced Power Limit"),
        ("Power Readings", "Power Limit"),
    ):
        value = to_float(body.value(section, key))
        if value is not None:
            return value
    return None


def _q_remapped(body: _Body) -> dict[str, Any] | None:
    block = body.find("Remapped Rows")
    if block is None or not block.children:
        return None  # absent, or "Remapped Rows : N/A"
    return _remapped(
        _yes_no(_value(block, "Pending")),
        _yes_no(_value(block, "Remapping Failure Occurred")),
        to_int(_value(block, "Uncorrectable Error")),
    )


_Q_HEALTH = {
    "summary": "summary",
    "bandwidth": "bandwidth",
    "route recovery in progress": "route_recovery_in_progress",
    "route unhealthy": "route_unhealthy",
    "access timeout recovery": "access_timeout_recovery",
    "incorrect configuration": "incorrect_configuration",
    "partition assigned": "partition_assigned",
}


def _q_fabric(body: _Body) -> dict[str, Any]:
    block = body.find("Fabric")
    if block is None:
        return _fabric()
    health_node = _find(block, "Health")
    health = {}
    if health_node is not None:
        health = {_Q_HEALTH[c.key.lower()]: _na(c.value) for c in health_node.children if c.key.lower() in _Q_HEALTH}
    return _fabric(
        state=_na(_value(block, "State")),
        status=_na(_value(block, "Status")),
        clique_id=to_int(_value(block, "CliqueId")),
        cluster_uuid=_na(_value(block, "ClusterUUID")),
        health=health,
    )


def _q_mig_devices(body: _Body) -> int | None:
    if body.find("MIG Mode") is None:
        return None  # section not printed (-q -d <section>, excerpts): unknown, not zero
    return body.titles.count("mig device")


def _q_gpu(index: int, bus_id: str | None, body: _Body) -> dict[str, Any]:
    link = body.find("PCI", "GPU Link Info")
    return _gpu(
        index,
        name=_na(body.value("Product Name")),
        uuid=_na(body.value("GPU UUID")),
        bus_id=bus_id or _na(body.value("PCI", "Bus Id")),
        vbios=_na(body.value("VBIOS Version")),
        architecture=_na(body.value("Product Architecture")),
        persistence_mode=_mode(body.value("Persistence Mode")),
        ecc_mode=_mode(body.value("ECC Mode", "Current")),
        mig_mode=_mode(body.value("MIG Mode", "Current")),
        mig_devices=_q_mig_devices(body),
        power_limit_w=_q_power_limit(body),
        throttle_reasons=_q_reasons(body),
        pcie_gen=to_int(_value(link, "PCIe Generation", "Current")),
        pcie_width=to_int(_value(link, "Link Width", "Current")),
        remapped_rows=_q_remapped(body),
        fabric=_q_fabric(body),
    )


def _q_sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    r"""(head, [(bus id, body)]): the text before the first "GPU <bus id>" line, and each GPU's lines after it.

    The headers are found by one regex pass over the text, which needs lines separated by "\n" alone: other
    line breaks (CR, \v, \f...) are rare, so the text is only re-joined when it has one. TABs are expanded
    once for the whole text, as indent_tree would per line (expandtabs restarts its columns at "\n").
    """
    text = strip_ansi(text)
    if any(brk in text for brk in _OTHER_LINE_BREAKS):
        text = "\n".join(text.splitlines())
    if "\t" in text:
        text = text.expandtabs(8)
    text = "\n" + text  # so that a header on the first line starts with "\n" too
    headers = list(_GPU_HEADER.finditer(text))
    if not headers:
        return text, []
    ends = [h.start() for h in headers[1:]] + [len(text)]
    # each body keeps the "\n" that ends its header line: _Body.of_text's patterns start with one
    return text[: headers[0].start()], [(h.group(1), text[h.end() : end]) for h, end in zip(headers, ends)]


def parse_q(text: str) -> dict[str, Any]:
    """Parse `nvidia-smi -q` (full or `-d <section>`), or a headerless excerpt of one GPU body."""
    head, sections = _q_sections(text)
    top = indent_tree(head)
    notes: list[str] = []
    if sections:
        gpus = [_q_gpu(i, bus, _Body.of_text(body)) for i, (bus, body) in enumerate(sections)]
    elif any(c.key.lower() in _GPU_BODY_KEYS for c in top.children):
        # A pasted excerpt (e.g. only the Fabric block) with no "GPU <bus id>" line: one GPU at index 0.
        gpus = [_q_gpu(0, None, _Body.of_node(top))]
        notes.append("no 'GPU <bus id>' header: output read as the body of a single GPU (index 0)")
    elif _value(top, "Driver Version") is not None:
        gpus = []
    else:
        raise ParseError(f"not nvidia-smi -q output: {first_line(text)!r}")

    partial = [g["bus_id"] or str(g["index"]) for g in gpus if g["name"] is None]
    if partial:
        notes.append(f"no Product Name for GPU {', '.join(partial)} (partial output such as -q -d <section>)")
    return _fragment(
        gpus,
        driver_version=_na(_value(top, "Driver Version")),
        cuda_version=_na(_value(top, "CUDA Version")),
        attached_gpus=to_int(_value(top, "Attached GPUs")),
        notes=notes,
    )


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q -x (XML, DTD v12/v13)


def _xt(element: Element | None, path: str) -> str | None:
    if element is None:
        return None
    return _na(element.findtext(path))


def _x_reasons(gpu: Element) -> list[str]:
    active: list[str] = []
    for block, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),  # before driver 535
    ):
        element = gpu.find(block)
        for child in element if element is not None else ():
            if child.tag.startswith(prefix) and (child.text or "").strip() == "Active":
                active.append(child.tag[len(prefix) :])
    return _ordered_reasons(active)


def _x_power_limit(gpu: Element) -> float | None:
    for path in (
        "gpu_power_readings/current_power_limit",
        "power_readings/current_power_limit",
        "power_readings/enforced_power_limit",
        "power_readings/power_limit",
    ):
        value = to_float(_xt(gpu, path))
        if value is not None:
            return value
    return None


def _x_remapped(gpu: Element) -> dict[str, Any] | None:
    block = gpu.find("remapped_rows")
    if block is None or len(block) == 0:
        return None  # "<remapped_rows>N/A</remapped_rows>"
    return _remapped(
        _yes_no(_xt(block, "remapped_row_pending")),
        _yes_no(_xt(block, "remapped_row_failure")),
        to_int(_xt(block, "remapped_row_unc")),
    )


def _x_fabric(gpu: Element) -> dict[str, Any]:
    block = gpu.find("fabric")
    if block is None:
        return _fabric()
    return _fabric(
        state=_xt(block, "state"),
        status=_xt(block, "status"),
        clique_id=to_int(_xt(block, "cliqueId")),
        cluster_uuid=_xt(block, "clusterUuid"),
        health={k: _xt(block, f"health/{k}") for k in HEALTH_KEYS},
    )


def _x_gpu(index: int, gpu: Element) -> dict[str, Any]:
    link = gpu.find("pci/pci_gpu_link_info")
    return _gpu(
        index,
        name=_xt(gpu, "product_name"),
        uuid=_xt(gpu, "uuid"),
        bus_id=_xt(gpu, "pci/pci_bus_id") or _na(gpu.get("id")),
        vbios=_xt(gpu, "vbios_version"),
        architecture=_xt(gpu, "product_architecture"),
        persistence_mode=_mode(_xt(gpu, "persistence_mode")),
        ecc_mode=_mode(_xt(gpu, "ecc_mode/current_ecc")),
        mig_mode=_mode(_xt(gpu, "mig_mode/current_mig")),
        mig_devices=len(gpu.findall("mig_devices/mig_device")) if gpu.find("mig_mode") is not None else None,
        power_limit_w=_x_power_limit(gpu),
        throttle_reasons=_x_reasons(gpu),
        pcie_gen=to_int(_xt(link, "pcie_gen/current_link_gen")),
        pcie_width=to_int(_xt(link, "link_widths/current_link_width")),
        remapped_rows=_x_remapped(gpu),
        fabric=_x_fabric(gpu),
    )


def parse_q_xml(text: str) -> dict[str, Any]:
    """Parse `nvidia-smi -q -x`; the DOCTYPE names an external DTD that is never loaded."""
    if not text.strip():
        raise ParseError("empty output")
    try:
        root = SafeET.fromstring(text)
    except (XMLSyntaxError, DefusedXmlException) as exc:
        raise ParseError(f"not nvidia-smi XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"unexpected XML root <{root.tag}>, expected <nvidia_smi_log>")
    gpus = [_x_gpu(i, g) for i, g in enumerate(root.findall("gpu"))]
    return _fragment(
        gpus,
        driver_version=_xt(root, "driver_version"),
        cuda_version=_xt(root, "cuda_version"),
        attached_gpus=to_int(_xt(root, "attached_gpus")),
        notes=[],
    )


# ---------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv

QUERY_GPU_FIELDS = (
    "index",
    "pci.bus_id",
    "name",
    "uuid",
    "driver_version",
    "vbios_version",
    "persistence_mode",
    "ecc.mode.current",
    "power.limit",
    "clocks_throttle_reasons.active",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "fabric.state",
    "fabric.status",
)

_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")  # "power.limit [W]" -> "power.limit"
_ELIDED = {"[...]", "...", "…"}
# Query aliases print under their canonical header; accept both spellings.
_CSV_ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_uuid": "uuid",
    "clocks_event_reasons": "clocks_throttle_reasons",
}


def _csv_key(header: str) -> str:
    head, dot, rest = _UNIT.sub("", header.strip()).lower().partition(".")
    return _CSV_ALIASES.get(head, head) + dot + rest


def _csv_reasons(row: dict[str, str]) -> list[str]:
    mask = _na(row.get("clocks_throttle_reasons.active"))
    if mask and re.fullmatch(r"0[xX][0-9A-Fa-f]+", mask):
        bits = int(mask, 16)
        return [name for name, bit in THROTTLE_BITS if bits & bit]
    # No mask column: fall back to the per-reason "Active"/"Not Active" columns.
    return _ordered_reasons(
        name for name in THROTTLE_NAMES if (row.get(f"clocks_throttle_reasons.{name}") or "").strip() == "Active"
    )


def _csv_power_limit(row: dict[str, str]) -> float | None:
    limit = to_float(row.get("power.limit"))
    return limit if limit is not None else to_float(row.get("enforced.power.limit"))


def _csv_gpu(position: int, row: dict[str, str]) -> dict[str, Any]:
    index = to_int(row.get("index"))
    return _gpu(
        position if index is None else index,
        name=_na(row.get("name")),
        uuid=_na(row.get("uuid")),
        bus_id=_na(row.get("pci.bus_id")),
        vbios=_na(row.get("vbios_version")),
        persistence_mode=_mode(row.get("persistence_mode")),
        ecc_mode=_mode(row.get("ecc.mode.current")),
        mig_mode=_mode(row.get("mig.mode.current")),
        power_limit_w=_csv_power_limit(row),
        throttle_reasons=_csv_reasons(row),
        pcie_gen=to_int(row.get("pcie.link.gen.current")),
        pcie_width=to_int(row.get("pcie.link.width.current")),
        remapped_rows=_remapped(
            _yes_no(row.get("remapped_rows.pending")),
            _yes_no(row.get("remapped_rows.failure")),
            to_int(row.get("remapped_rows.uncorrectable")),
        ),
        fabric=_fabric(
            state=_na(row.get("fabric.state")),
            status=_na(row.get("fabric.status")),
            clique_id=to_int(row.get("fabric.cliqueid")),
            cluster_uuid=_na(row.get("fabric.clusteruuid")),
            health={k: _na(row.get(f"fabric.health.{k}")) for k in HEALTH_KEYS},
        ),
    )


def parse_query_gpu_csv(text: str) -> dict[str, Any]:
    """Parse `nvidia-smi --query-gpu=... --format=csv` (with header; any field subset and order)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError("empty output")
    header = [_csv_key(h) for h in next(csv.reader([lines[0]], skipinitialspace=True))]
    if not {"index", "name", "pci.bus_id", "uuid", "driver_version"} & set(header):
        raise ParseError(f"not nvidia-smi --query-gpu CSV: {first_line(text)!r}")
    gpus: list[dict[str, Any]] = []
    rows: list[dict[str, str]] = []
    notes: list[str] = []
    for lineno, line in enumerate(lines[1:], start=2):
        if line.strip() in _ELIDED:
            notes.append(f"line {lineno}: rows elided in the source ({line.strip()})")
            continue
        cells = [c.strip() for c in next(csv.reader([line], skipinitialspace=True))]
        if len(cells) != len(header):
            notes.append(f"line {lineno}: {len(cells)} cells for {len(header)} columns, skipped")
            continue
        row = dict(zip(header, cells, strict=True))
        rows.append(row)
        gpus.append(_csv_gpu(len(gpus), row))
    if notes and "index" not in header:
        notes.append("no index column: indexes are row positions")
    first = rows[0] if rows else {}
    return _fragment(
        gpus,
        driver_version=_na(first.get("driver_version")),
        cuda_version=None,  # not a --query-gpu field
        attached_gpus=to_int(first.get("count")),
        notes=notes,
    )


# ---------------------------------------------------------------------------------------------
# /proc/driver/nvidia/version

_NVRM = re.compile(
    r"^NVRM version:\s*NVIDIA UNIX\s+(?P<open>Open\s+)?(?:(?P<arch1>[\w-]+)\s+)?Kernel Module"
    r"(?:\s+for\s+(?P<arch2>[\w-]+))?\s+(?P<version>\d+(?:\.\d+)+)\s*(?P<build>.*?)\s*$",
    re.MULTILINE,
)
_GCC = re.compile(r"^GCC version:\s*(?:gcc version\s+)?(?P<version>\S+)", re.MULTILINE)


def parse_driver_version(text: str) -> dict[str, Any]:
    """Parse /proc/driver/nvidia/version: version, open vs proprietary kernel module, build line."""
    match = _NVRM.search(text)
    if not match:
        raise ParseError(f"no 'NVRM version:' line: {first_line(text)!r}")
    gcc = _GCC.search(text)
    return {
        "version": match["version"],
        "kernel_module": "open" if match["open"] else "proprietary",
        "build": match["build"],
        "arch": match["arch2"] or match["arch1"],
        "gcc_version": gcc["version"] if gcc else None,
    }


# ---------------------------------------------------------------------------------------------
# Schemas


_MODES = ["Enabled", "Disabled", None]

_HEALTH_DESC = {
    "summary": "Fabric health summary as printed (Healthy, Unhealthy).",
    "bandwidth": "Fabric bandwidth state as printed (Full, Degraded).",
    "route_recovery_in_progress": "Whether NVLink route recovery is in progress (True/False as printed).",
    "route_unhealthy": "Whether a fabric route is unhealthy (True/False as printed).",
    "access_timeout_recovery": "Whether access-timeout recovery happened (True/False as printed).",
    "incorrect_configuration": "Incorrect fabric configuration reason as printed (None when correct).",
    "partition_assigned": "Whether an NVLink partition is assigned (as printed; newer drivers only).",
}

FABRIC_SCHEMA = obj(
    "GPU fabric registration (H100 and later; GB200 adds clique, cluster and health).",
    {
        "state": string("Registration state as printed: Not Started, In Progress, Completed.", True),
        "status": string("Registration result as printed: Success or an error such as Insufficient Resources.", True),
        "clique_id": integer("NVLink clique id; 0 on single-node NVSwitch systems.", True),
        "cluster_uuid": string("NVLink cluster UUID; all zero outside a multi-node NVLink domain.", True),
        "health": obj(
            "Fabric health sub-block (driver 560 and later).",
            {k: string(d, True) for k, d in _HEALTH_DESC.items()},
            optional=("partition_assigned",),
        ),
    },
)

GPU_RECORD_SCHEMA = obj(
    "One GPU.",
    {
        "index": integer("nvidia-smi index (order of enumeration)."),
        "name": string("Product name; null when the output has no name (-q -d <section>, excerpts).", True),
        "uuid": string("GPU UUID.", True),
        "bus_id": string("PCI bus id as printed, e.g. 00000000:19:00.0.", True),
        "vbios": string("VBIOS version.", True),
        "architecture": string("Product architecture (Hopper, Blackwell...).", True),
        "persistence_mode": string("Persistence mode.", True, enum=_MODES),
        "ecc_mode": string("Current ECC mode.", True, enum=_MODES),
        "mig_mode": string("Current MIG mode.", True, enum=_MODES),
        "mig_devices": integer("MIG devices listed; null when the source cannot list them (CSV).", True),
        "power_limit_w": number("Current (enforced) GPU power limit in watts.", True),
        "throttle_reasons": array(
            "Active clock event (throttle) reasons.", {"type": "string", "enum": list(THROTTLE_NAMES)}
        ),
        "pcie_gen": integer("Current PCIe link generation.", True),
        "pcie_width": integer("Current PCIe link width (lanes).", True),
        "remapped_rows": obj(
            "Row remapper state (Ampere and later); null when not reported.",
            {
                "pending": boolean("A remap is pending until the GPU is reset.", True),
                "failure": boolean("A remapping failure occurred.", True),
                "uncorrectable": integer("Rows remapped for uncorrectable errors.", True),
            },
            nullable=True,
        ),
        "fabric": FABRIC_SCHEMA,
    },
    optional=("architecture", "mig_mode", "mig_devices"),
)

GPU_SCHEMA = obj(
    "GPUs as reported by nvidia-smi.",
    {
        "count": integer("Number of GPU records parsed."),
        "attached_gpus": integer("Attached GPUs as the tool reports it.", True),
        "driver_version": string("Driver version, e.g. 535.161.08.", True),
        "cuda_version": string("CUDA version the driver supports, e.g. 12.2.", True),
        "gpus": array("One record per GPU.", GPU_RECORD_SCHEMA),
        "notes": array("What the parser noticed about partial or odd output.", {"type": "string"}),
    },
    optional=("attached_gpus", "notes"),
)

DRIVER_SCHEMA = obj(
    "The loaded NVIDIA kernel module (/proc/driver/nvidia/version).",
    {
        "version": string("Kernel module version, e.g. 570.195.03."),
        "kernel_module": string("open (Open Kernel Module) or proprietary.", enum=["open", "proprietary"]),
        "build": string("Build text after the version (Release Build, builder, date)."),
        "arch": string("CPU architecture the module was built for (x86_64, aarch64).", True),
        "gcc_version": string("GCC version the module was built with.", True),
    },
    optional=("arch", "gcc_version"),
)


COLLECTORS = (
    Collector(
        id="nvidia_smi_q",
        argv=("nvidia-smi", "-q"),
        parse=parse_q,
        provides="/gpu",
        schema=GPU_SCHEMA,
        family="gpu",
        description="GPU inventory, modes, throttle reasons, remapped rows and fabric state (nvidia-smi -q).",
        timeout_s=60.0,
        corpus=("nvidia-smi-q",),
    ),
    Collector(
        id="nvidia_smi_q_xml",
        argv=("nvidia-smi", "-q", "-x"),
        parse=parse_q_xml,
        provides="/gpu",
        schema=GPU_SCHEMA,
        family="gpu",
        description="Same facts as nvidia_smi_q from the XML report (nvidia-smi -q -x).",
        default=False,
        timeout_s=60.0,
        corpus=("nvidia-smi-q-xml",),
    ),
    Collector(
        id="nvidia_smi_query_gpu",
        argv=("nvidia-smi", "--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv"),
        parse=parse_query_gpu_csv,
        provides="/gpu",
        schema=GPU_SCHEMA,
        family="gpu",
        description="Same facts as nvidia_smi_q from selected --query-gpu fields (CSV).",
        default=False,
        corpus=("misc",),
    ),
    Collector(
        id="driver_version",
        argv=read_host_file("/proc/driver/nvidia/version"),
        parse=parse_driver_version,
        provides="/driver",
        schema=DRIVER_SCHEMA,
        family="gpu",
        description="Loaded NVIDIA kernel module version and flavour (open or proprietary).",
        corpus=("misc",),
    ),
)
