"""Facts documents: build one from raw command outputs (pure), and load a directory of them (validated)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import documents, spool
from .platforms import PLATFORMS, platform_of
from .collectors import COLLECTORS, Collector, ParseError
from .collectors.base import not_run_reason
from .errors import InputError, Problem
from .model import CommandResult
from .judging.pointer import split_pointer
from .runstore import facts_dir_of


def set_pointer(doc: dict[str, Any], ptr: str, value: Any) -> None:
    parts = split_pointer(ptr)
    node = doc
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def parse_output(collector: Collector, result: CommandResult) -> tuple[dict[str, Any], Any]:
    """(collector run record, fragment or None). Never raises: garbage from a host is a per-collector error."""
    run: dict[str, Any] = {"status": "ok", "exit_code": result.exit_code, "command": collector.command}
    if result.duration_s:
        run["duration_s"] = round(result.duration_s, 3)
    if result.error:
        run.update(status="error", error=result.error)
        return run, None
    size = spool.stdout_size(result)
    if size > spool.PARSE_BYTES:
        run.update(status="error", error=f"the output ({size:,} bytes) is larger than fabricproof parses "
                                         f"({spool.PARSE_BYTES >> 20} MiB): kept as evidence, not read")
        return run, None
    if size > spool.SHARED_PARSE_BYTES:
        # Parsing holds an output's text and its lines, up to ~9 times its size: outputs this large (no real node
        # prints one) are parsed one at a time, whichever host threads reach them together, so the client's peak
        # is bounded by one of them and not by how many flooding hosts happen to finish at the same moment.
        with _LARGE_PARSE:
            return _parse(collector, result, run)
    return _parse(collector, result, run)


#: One large output parsed at a time across the collection's host threads (see parse_output).
_LARGE_PARSE = threading.Lock()


def _parse(collector: Collector, result: CommandResult, run: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """parse_output's reading of an output that ran: skipped, an error, or its fragment."""
    stdout = spool.stdout_text(result)  # from its evidence file when it spilled: one output in memory at a time
    reason = not_run_reason(result.exit_code, stdout)
    if reason is not None:
        # Its prerequisite is absent (unconfigured, not broken): nothing ran, so nothing failed either.
        run.update(status="skipped", error=reason)
        return run, None
    if result.exit_code not in collector.ok_exit_codes and not stdout.strip():
        first = (spool.stderr_head(result).strip().splitlines() or [f"exit status {result.exit_code}"])[0]
        run.update(status="error", error=f"exit {result.exit_code}: {first[:200]}")
        return run, None
    try:
        fragment = collector.parse(stdout)
    except ParseError as exc:
        run.update(status="error", error=f"cannot parse output: {exc}")
        return run, None
    except Exception as exc:  # a parser bug must not sink the whole run; report it for this host
        run.update(status="error", error=f"parser {collector.id} crashed: {type(exc).__name__}: {exc}")
        return run, None
    notes = fragment.get("notes") if isinstance(fragment, dict) else None
    if notes:
        # What the parser could not read (a malformed table, an elided excerpt) goes with the run record, so a
        # check that finds its fact missing can say why.
        run["notes"] = [str(n) for n in notes]
    return run, fragment


def build(host: str, outputs: Mapping[str, CommandResult], *, via: str, groups: Iterable[str] = (),
          collected_at: str = "", evidence: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The facts document of one host from its raw outputs, keyed by collector id."""
    doc: dict[str, Any] = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": host, "via": via,
                           "groups": sorted(groups), "collectors": {}}
    if collected_at:
        doc["collected_at"] = collected_at
    for cid, result in outputs.items():
        collector = COLLECTORS[cid]
        run, fragment = parse_output(collector, result)
        if evidence and cid in evidence:
            run["evidence"] = evidence[cid]
        doc["collectors"][cid] = run
        if fragment is not None:
            set_pointer(doc, collector.provides, fragment)
    return doc


#: Where host_platform reads the platform: mark_not_applicable needs it wherever a collector serves only some platforms.
PLATFORM_FACT = "/gpu/gpus"


def host_platform(doc: Mapping[str, Any]) -> str | None:
    """The platform (a100, h100, ...) a facts document shows, from its GPUs' PCI device ids (else exact names);
    None if unknown or mixed."""
    gpus = ((doc.get("gpu") or {}).get("gpus")) or []
    found = {platform_of(g) for g in gpus if isinstance(g, dict)}
    return found.pop() if len(found) == 1 else None


def reads_platform(collector: Collector) -> bool:
    """Whether mark_not_applicable reads the host's platform (PLATFORM_FACT) to judge this collector's failure."""
    return not set(PLATFORMS) <= set(collector.platforms)


def mark_not_applicable(doc: dict[str, Any]) -> dict[str, Any]:
    """A collector that failed on a platform it is not for (no Fabric Manager on a GB200 tray, no IMEX on
    an H100) was not needed there: record it as skipped with the reason, not as a collection error."""
    platform = host_platform(doc)
    if platform is None:
        return doc
    for cid, run in doc.get("collectors", {}).items():
        collector = COLLECTORS.get(cid)
        if collector is None or run.get("status") != "error" or platform in collector.platforms:
            continue
        run["status"] = "skipped"
        run["error"] = f"not applicable on {platform} (for {', '.join(collector.platforms)}): {run.get('error', '')}"
    return doc


def validate_document(doc: documents.Document) -> None:
    documents.validate(doc, "facts")


def facts_files(directory: Path) -> list[Path]:
    """The <host>.json files of a facts directory (or of DIR/facts for a run directory), sorted. Exit 2 when there
    are none."""
    directory = Path(directory)
    if not directory.exists():
        raise InputError(Problem("facts directory not found", str(directory)))
    if not directory.is_dir():
        raise InputError(Problem("expected a directory of <host>.json facts", str(directory)))
    directory = facts_dir_of(directory)
    files = sorted(directory.glob("*.json"))
    if not files:
        raise InputError(Problem("no facts (*.json) in this directory", str(directory)))
    return files


def read(path: Path) -> dict[str, Any]:
    """One facts file, parsed and validated once. Exit 2 with the file, line and JSON path of every problem."""
    doc = documents.load_json(path)
    validate_document(doc)
    return doc.data


def iter_dir(directory: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(host, facts) of every file in DIR (or DIR/facts), one at a time in file order, each read and validated
    once: a caller that judges and lets go of each host holds one document, not the directory. A directory without
    facts is refused at once; problems in files are gathered and raised together (exit 2) after the last file, so
    a caller must act on nothing before then."""
    files = facts_files(directory)
    where, names = files[0].parent, [p.name for p in files]  # names: a Path costs ~250 B, 2.5 MB at 10,000 hosts
    del files
    return _documents(where / name for name in names)


def _documents(files: Iterable[Path]) -> Iterator[tuple[str, dict[str, Any]]]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for path in files:
        try:
            data = read(path)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        host = data["host"]
        if host in seen:
            problems.append(Problem(f"second facts document for host {host!r}", str(path), None, "/host"))
            continue
        seen.add(host)
        if not problems:  # once a file is bad the run fails: the rest are only checked
            yield host, data
    if problems:
        raise InputError(problems)


def load_dir(directory: Path) -> dict[str, dict[str, Any]]:
    """All facts in DIR (or DIR/facts for a run directory), validated, keyed by host. Exit 2 on any problem."""
    return dict(iter_dir(directory))


def dump(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"
