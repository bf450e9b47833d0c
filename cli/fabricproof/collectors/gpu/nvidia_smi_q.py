"""`nvidia-smi -q` (text, full or `-d <section>`) -> the /gpu fragment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..textutil import Node, first_line, indent_tree, strip_ansi, to_float, to_int
from .fragment import (
    GPU_SCHEMA,
    ecc_errors,
    fabric_record,
    gpu_fragment,
    gpu_record,
    mode,
    na,
    ordered_reasons,
    pci_device_id,
    remapped,
    retired,
    yes_no,
)

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
            self.first[title].children = _section("".join(self.pending.pop(title)))
        found = self.first.get(title)
        return _find(found, *path) if path and found is not None else found

    def value(self, key: str, *path: str) -> str | None:
        found = self.find(key, *path)
        return found.value if found else None


@lru_cache(maxsize=256)
def _section(text: str) -> list[Node]:
    """The lines under one section title, parsed. The same text parses the same, and most sections are printed alike
    by a node's GPUs and by a fleet's nodes (throttle reasons, ECC counters, remapped rows, retired pages, modes, the
    fabric's state), so each distinct text is read once (bounded). The nodes are shared: the parser only reads them."""
    return indent_tree(text).children


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
    return ordered_reasons(r for r in active if r)


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
    return remapped(
        yes_no(_value(block, "Pending")),
        yes_no(_value(block, "Remapping Failure Occurred")),
        to_int(_value(block, "Uncorrectable Error")),
        to_int(_value(block, "Correctable Error")),
    )


# ECC Errors -> Volatile/Aggregate line titles, per layout (R535+ data center, R535 GeForce, Volta and older).
_Q_ECC = {
    "sram correctable": "sram_correctable",
    "sram uncorrectable": "sram_uncorrectable",
    "sram uncorrectable parity": "sram_uncorrectable_parity",
    "sram uncorrectable sec-ded": "sram_uncorrectable_secded",
    "dram correctable": "dram_correctable",
    "dram uncorrectable": "dram_uncorrectable",
}
_Q_ECC_FLAGS = {
    "channel repair pending": "channel_repair_pending",
    "tpc repair pending": "tpc_repair_pending",
    "unrepairable memory": "unrepairable_memory",
}


def _q_ecc_scope(scope: Node | None) -> dict[str, int | None]:
    if scope is None:
        return {}
    counts: dict[str, int | None] = {}
    for child in scope.children:
        title = child.key.lower()
        if title in _Q_ECC:
            counts[_Q_ECC[title]] = to_int(child.value)
        elif title in ("single bit", "double bit"):  # Volta and older: per-unit counts and their Total
            counts[title.replace(" ", "_")] = to_int(_value(child, "Total"))
    return counts


def _q_ecc(body: _Body) -> dict[str, Any] | None:
    block = body.find("ECC Errors")
    if block is None or not block.children:
        return None
    flags = {key: yes_no(_value(block, title)) for title, key in _Q_ECC_FLAGS.items()}
    flags["sram_threshold_exceeded"] = yes_no(_value(block, "Aggregate", "SRAM Threshold Exceeded"))
    return ecc_errors(_q_ecc_scope(_find(block, "Volatile")), _q_ecc_scope(_find(block, "Aggregate")), flags)


def _q_retired(body: _Body) -> dict[str, Any] | None:
    block = body.find("Retired Pages")
    if block is None:
        return None
    pending = _value(block, "Pending Page Blacklist") or _value(block, "Pending Page Retirement")
    return retired(to_int(_value(block, "Single Bit ECC")), to_int(_value(block, "Double Bit ECC")), yes_no(pending))


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
        return fabric_record()
    health_node = _find(block, "Health")
    health = {}
    if health_node is not None:
        health = {_Q_HEALTH[c.key.lower()]: na(c.value) for c in health_node.children if c.key.lower() in _Q_HEALTH}
    return fabric_record(
        state=na(_value(block, "State")),
        status=na(_value(block, "Status")),
        clique_id=to_int(_value(block, "CliqueId")),
        cluster_uuid=na(_value(block, "ClusterUUID")),
        health=health,
    )


def _q_mig_devices(body: _Body) -> int | None:
    if body.find("MIG Mode") is None:
        return None  # section not printed (-q -d <section>, excerpts): unknown, not zero
    return body.titles.count("mig device")


def _q_gpu(index: int, bus_id: str | None, body: _Body) -> dict[str, Any]:
    link = body.find("PCI", "GPU Link Info")
    return gpu_record(
        index,
        name=na(body.value("Product Name")),
        uuid=na(body.value("GPU UUID")),
        bus_id=bus_id or na(body.value("PCI", "Bus Id")),
        pci_device_id=pci_device_id(body.value("PCI", "Device Id")),
        vbios=na(body.value("VBIOS Version")),
        architecture=na(body.value("Product Architecture")),
        persistence_mode=mode(body.value("Persistence Mode")),
        ecc_mode=mode(body.value("ECC Mode", "Current")),
        mig_mode=mode(body.value("MIG Mode", "Current")),
        mig_devices=_q_mig_devices(body),
        power_limit_w=_q_power_limit(body),
        throttle_reasons=_q_reasons(body),
        pcie_gen=to_int(_value(link, "PCIe Generation", "Current")),
        pcie_width=to_int(_value(link, "Link Width", "Current")),
        remapped_rows=_q_remapped(body),
        ecc_errors=_q_ecc(body),
        retired_pages=_q_retired(body),
        recovery_action=na(body.value("GPU Recovery Action")),
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
        bodies = [_Body.of_text(body) for _, body in sections]
        gpus = [_q_gpu(i, bus, body) for i, ((bus, _), body) in enumerate(zip(sections, bodies))]
    elif any(c.key.lower() in _GPU_BODY_KEYS for c in top.children):
        # A pasted excerpt (e.g. only the Fabric block) with no "GPU <bus id>" line: one GPU at index 0.
        bodies = [_Body.of_node(top)]
        gpus = [_q_gpu(0, None, bodies[0])]
        notes.append("no 'GPU <bus id>' header: output read as the body of a single GPU (index 0)")
    elif _value(top, "Driver Version") is not None:
        bodies, gpus = [], []
    else:
        raise ParseError(f"not nvidia-smi -q output: {first_line(text)!r}")

    partial = [(g["bus_id"] or str(g["index"]), body) for g, body in zip(gpus, bodies) if g["name"] is None]
    if partial:
        # -q -d ECC, -q -d ROW_REMAPPER...: only the facts of the sections shown are read; the rest stay null.
        shown = list(dict.fromkeys(partial[0][1].first[t].key for t in partial[0][1].titles))
        notes.append(f"no Product Name for GPU {', '.join(b for b, _ in partial)} (partial output such as "
                     f"-q -d <section>): sections shown: {', '.join(shown) or 'none'}")
    return gpu_fragment(
        gpus,
        driver_version=na(_value(top, "Driver Version")),
        cuda_version=na(_value(top, "CUDA Version")),
        attached_gpus=to_int(_value(top, "Attached GPUs")),
        notes=notes,
    )


COLLECTORS = (
    Collector(
        id="nvidia_smi_q",
        argv=tools.argv("nvidia_smi_q"),
        parse=parse_q,
        provides="/gpu",
        schema=GPU_SCHEMA,
        family="gpu",
        description="GPU inventory, modes, throttle reasons, ECC counters, retired pages, remapped rows, recovery action "
        "and fabric state (nvidia-smi -q).",
        corpus=("nvidia-smi-q",),
    ),
)
