"""The run directory's one owner: layout, manifest (run.json), raw evidence, facts, recorded errors, durability.

A run directory holds everything one collection produced, so evaluation can be re-run on the same evidence:

    RUNDIR/run.json                      the manifest (schemas/run.schema.json): status, hosts, collectors, errors
    RUNDIR/raw/<host>/<name>.txt         what a command printed on stdout (.stderr beside it when not empty)
    RUNDIR/raw/<host>/meta.json          per command: argv, exit status, duration, transport error, sizes
    RUNDIR/facts/<host>.json             the parsed facts (schemas/facts.schema.json)
    RUNDIR/report.json                   the verdict, when `validate` judged the run
    RUNDIR/fabric/raw/<vantage>/         the fabric-scope tools' outputs, once per run, on the vantage host
    RUNDIR/fabric/fabric.json            the fabric they showed (subnet.model's document) and its diff's findings

<host> is the host's name when it is short and plain; any other name (a 253-character FQDN, `zz/bad`) goes by a
readable cut of it and a hash (`file_name`), and run.json's evidence_names maps such hosts to their names.

Everything is the owner's only (0700 directories, 0600 files): raw outputs show a fleet's addresses,
firmware and errors. No symbolic link inside it is followed: one planted there (RUNDIR/raw -> elsewhere) is
refused, exit 2, and nothing is written through it. A host's evidence is written whole in a hidden sibling and renamed into place, so a
reader sees it complete or not at all; the file system is synced once before run.json calls a run complete.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import documents
from .errors import STORAGE_ERRNOS, InputError, Problem, WriteError, writing
from .fsutil import create_private, planted, private_dir, refuse_links, refuse_links_in
from .model import CommandResult, decoded

RUN_FILE = "run.json"
RAW_DIR = "raw"
FACTS_DIR = "facts"
PROBES_DIR = "probes"
FABRIC_DIR = "fabric"
FABRIC_FILE = "fabric.json"
COLLECTIVE_DIR = "collective"  # under PROBES_DIR: each launcher's output and host file
COLLECTIVE_FILE = "collective.json"
META_FILE = "meta.json"
REPORT_FILE = "report.json"
STDOUT_SUFFIX = ".txt"
STDERR_SUFFIX = ".stderr"
DIR_MODE = 0o700
FILE_MODE = 0o600

# Facts are written by msgspec: ~13x cheaper than json's C encoder for a lab host's 174 KB (0.27 against 3.4 ms), the
# same bytes for every lab host (key order kept, UTF-8 unescaped, compact). Floats in exponent form are spelled
# shorter (2.5e-8, json: 2.5e-08: the same number), and NaN or infinity is null where json wrote NaN, which no
# JSON reader (documents.load_json included) takes. orjson is as fast but refuses integers past 64 bits, which a
# host's counter text can hold. Made on first use: `check --local` pins its imports, and most commands never
# write facts.
@functools.cache
def _facts_json() -> Any:
    """The facts' encoder, made once."""
    import msgspec

    return msgspec.json.Encoder()


def facts_bytes(doc: Mapping[str, Any]) -> bytes:
    """A facts document as its file holds it."""
    return _facts_json().encode(doc) + b"\n"


def facts_from_bytes(data: bytes) -> dict[str, Any]:
    """A facts document back from facts_bytes (a worker's host crossing to the process that started the run)."""
    import msgspec

    return msgspec.json.decode(data)


#: Longest host name a run keeps as its file name: the hidden staging name (.<name>.partial) and the facts' temporary
#: file (.<name>.json.tmp) must stay within NAME_MAX (255 bytes), with room to spare.
READABLE_MAX = 128
#: A host name kept as its file name: what host names and addresses are made of ('~' is left out: it marks made names).
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@+=,-]*")
_CUT = 48


def file_name(host: str) -> str:
    """The name a host's evidence and facts go by: the host name itself when it is short and plain, else a readable
    cut of it, '~' and 16 hex digits of its SHA-256. Any legal host name (253 characters) and any inventory name
    (`zz/bad`, `.x`) gets one that fits a file system and stays inside the run directory."""
    if len(host) <= READABLE_MAX and _PLAIN.fullmatch(host):
        return host
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", host)[:_CUT].lstrip(".-")
    return f"{readable}~{hashlib.sha256(host.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"


@dataclass(frozen=True)
class Recorded:
    """One command as a run recorded it on one host."""

    stdout: str
    stderr: str
    exit_code: int | None
    duration_s: float
    error: str | None
    stdout_bytes: bytes | None = None  # the file's bytes when they are not valid UTF-8 (see CommandResult)
    stderr_bytes: bytes | None = None


def manifest_document(*, run_id: str, status: str, via: str, tool_version: str, started_at: str, finished_at: str,
                      duration_s: float, hosts: Iterable[str], commands: Iterable[Mapping[str, Any]], collected: int,
                      errors: Mapping[str, tuple[str, str]], command_errors: Mapping[str, Mapping[str, str]],
                      settings: Mapping[str, Any], done: Iterable[str] | None = None,
                      reason: str = "") -> dict[str, Any]:
    """run.json as schemas/run.schema.json defines it. `errors` is host -> (kind, message) for hosts not collected;
    `command_errors` host -> collector id -> reason; `settings` the run's inventory, limit, forks, workers and
    timeouts; `done` the hosts that finished (collected or not), in that order, once the run has ended; `reason`
    why an incomplete run stopped."""
    hosts = list(hosts)
    renamed = {h: file_name(h) for h in hosts if file_name(h) != h}
    doc = {
        "apiVersion": "fabricproof/v1", "kind": "CollectionRun", "run_id": run_id, "status": status, "via": via,
        "tool_version": tool_version, "started_at": started_at, "finished_at": finished_at,
        "duration_s": round(duration_s, 3), **settings,
        "hosts": hosts,
        "collectors": [dict(c) for c in commands],
        "counts": {"hosts": len(hosts), "collected": collected, "not_collected": len(errors),
                   "with_collector_errors": len(command_errors)},
        "errors": {h: {"kind": kind, "message": message} for h, (kind, message) in sorted(errors.items())},
        "collector_errors": {h: dict(e) for h, e in sorted(command_errors.items())},
    }
    if reason:
        doc["reason"] = reason
    if renamed:
        doc["evidence_names"] = renamed
    if done is not None:
        done = list(done)
        finished = set(done)
        doc["done"] = done
        doc["pending"] = [h for h in hosts if h not in finished]
        doc["counts"]["pending"] = len(doc["pending"])
    return doc


def check_host_names(names: Iterable[str]) -> None:
    """Every host name gets a file name (file_name), so only an empty one is refused."""
    if any(not n for n in names):
        raise InputError("an empty host name: inventory host names for collection must not be empty")


def facts_dir_of(directory: Path) -> Path:
    """Where a directory keeps facts: DIR/facts for a run directory, DIR itself for a plain facts directory."""
    directory = Path(directory)
    return directory / FACTS_DIR if (directory / FACTS_DIR).is_dir() else directory


class RunStore:
    """One run directory. `create` makes a new one for writing; `open` reads an existing one."""

    def __init__(self, root: Path):
        self.root = Path(root)

    # ------------------------------------------------------------------------------ making one
    @classmethod
    def create(cls, root: Path) -> RunStore:
        """A new run directory, or an empty one: evidence is never overwritten (exit 2 otherwise). Calling it
        again on the directory it made, before the run began, is harmless."""
        store = cls(root)
        if store.root.is_symlink():  # a run store inside another run (probes/) must not lead out of it either
            raise InputError(Problem(f"the run directory is a symbolic link (to {os.readlink(store.root)}): name the "
                                     "directory itself", str(store.root)))
        if store.root.exists() and not store.root.is_dir():
            raise InputError(Problem("the run directory is a file", str(store.root)))
        if store.root.is_dir():
            refuse_links_in(store.root)
        if store.holds_a_run():
            raise InputError(Problem("this directory already holds a collection run; give a new directory",
                                     str(store.root)))
        try:
            store.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            os.chmod(store.root, DIR_MODE)  # whatever the umask or an existing empty directory's mode
        except OSError as exc:
            if exc.errno in STORAGE_ERRNOS:
                raise WriteError(store.root, exc.strerror or str(exc), exc.errno) from None
            raise InputError(Problem(f"cannot create the run directory: {exc.strerror}", str(store.root))) from None
        return store

    def begin(self) -> None:
        """Make the evidence and facts directories: from here on the directory holds a run."""
        with writing(self.root):
            for sub in (RAW_DIR, FACTS_DIR):
                private_dir(self.root, sub, mode=DIR_MODE)

    @classmethod
    def open(cls, root: Path) -> RunStore:
        store = cls(root)
        if not store.root.is_dir():
            raise InputError(Problem("run directory not found", str(store.root)))
        return store

    def holds_a_run(self) -> bool:
        """A manifest, a facts directory, or any host's evidence (hidden staging left by a crash does not count)."""
        if (self.root / RUN_FILE).exists() or (self.root / FACTS_DIR).exists():
            return True
        raw = self.root / RAW_DIR
        return raw.is_dir() and any(not p.name.startswith(".") for p in raw.iterdir())

    # ------------------------------------------------------------------------------ paths
    @property
    def manifest_path(self) -> Path:
        return self.root / RUN_FILE

    @property
    def probes_root(self) -> Path:
        """Where the run's probes keep a run store of their own (raw/, facts/, run.json), next to its collection."""
        return self.root / PROBES_DIR

    @property
    def fabric_root(self) -> Path:
        """Where the run's fabric-scope collection keeps a run store of its own (raw/<vantage>/, fabric.json)."""
        return self.root / FABRIC_DIR

    @property
    def fabric_path(self) -> Path:
        """The fabric document of a fabric store (a run's fabric_root)."""
        return self.root / FABRIC_FILE

    @property
    def collective_dir(self) -> Path:
        """A collective run's launches: each launcher's output and host file (`fabricproof collective run`)."""
        return self.root / PROBES_DIR / COLLECTIVE_DIR

    @property
    def collective_path(self) -> Path:
        """A collective run's every launch and the search's path (collective.json)."""
        return self.root / COLLECTIVE_FILE

    @property
    def report_path(self) -> Path:
        return self.root / REPORT_FILE

    def report_file(self, extension: str) -> Path:
        """The run's report in one format, beside its evidence (report.json, report.md, ...)."""
        return self.root / f"{Path(REPORT_FILE).stem}.{extension}"

    def raw_dir(self, host: str) -> Path:
        return self.root / RAW_DIR / file_name(host)

    @property
    def spool_dir(self) -> Path:
        """Where a transport puts output past its memory bound as it arrives (hidden files, spool.PREFIX): on the
        evidence's own file system, so write_evidence renames them into place instead of copying."""
        return self.root / RAW_DIR

    def facts_path(self, host: str) -> Path:
        return self.root / FACTS_DIR / f"{file_name(host)}.json"

    @staticmethod
    def evidence_ref(host: str, name: str) -> str:
        """The path of a command's saved output relative to the run directory, as facts and reports cite it."""
        return f"{RAW_DIR}/{file_name(host)}/{name}{STDOUT_SUFFIX}"

    # ------------------------------------------------------------------------------ writing
    def write_manifest(self, doc: Mapping[str, Any]) -> None:
        from .fsutil import atomic_write_text

        atomic_write_text(self.manifest_path, json.dumps(doc, indent=1) + "\n", mode=FILE_MODE)

    def write_evidence(self, host: str, outputs: Mapping[str, CommandResult]) -> dict[str, str]:
        """RUNDIR/raw/<host>/, written whole in a hidden sibling and renamed into place (one rename, not one per
        file). Returns name -> evidence reference for the facts document. WriteError naming raw/<host> when the
        storage fails under it (discard_staging frees what it left)."""
        with writing(self.raw_dir(host)):
            return self._write_evidence(host, outputs)

    def _write_evidence(self, host: str, outputs: Mapping[str, CommandResult]) -> dict[str, str]:
        final = refuse_links(self.root, self.raw_dir(host))
        if final.exists():
            raise FileExistsError(f"{final}: this run already holds evidence of {host}; evidence is never overwritten")
        staging = final.with_name(f".{final.name}.partial")  # hidden: file names never start with "."
        if staging.is_symlink():
            raise planted(staging)
        if staging.exists():
            shutil.rmtree(staging)  # left by a crash of an earlier attempt at this very run directory
        staging.mkdir(mode=DIR_MODE)
        meta: dict[str, Any] = {}
        evidence: dict[str, str] = {}
        # Every file is made relative to the staging directory's descriptor: the kernel walks the run directory's
        # path once a host, not once for each of its ~30 files (path lookups were most of the evidence's system CPU).
        at = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name, r in outputs.items():
                # byte for byte what the host printed (a spilled output is already that file)
                out = _place(at, f"{name}{STDOUT_SUFFIX}", r.stdout_raw, r.stdout_path, always=True)
                err = _place(at, f"{name}{STDERR_SUFFIX}", r.stderr_raw, r.stderr_path, always=False)
                evidence[name] = self.evidence_ref(host, name)
                meta[name] = {"argv": list(r.argv), "exit_code": r.exit_code, "duration_s": round(r.duration_s, 3),
                              "error": r.error, "stdout_bytes": out, "stderr_bytes": err}
            # One command per line: readable, and the C encoder (indent= would take the pure-Python one).
            _write_at(at, META_FILE, ("{\n" + ",\n".join(f"{json.dumps(n)}:{json.dumps(m)}"
                                                         for n, m in meta.items()) + "\n}\n").encode())
        finally:
            os.close(at)
        os.rename(staging, final)
        return evidence

    def placed(self, host: str, name: str, result: CommandResult) -> CommandResult:
        """A result whose spilled outputs write_evidence moved: pointing at their evidence files, where parsers
        read them."""
        if result.stdout_path is None and result.stderr_path is None:
            return result
        directory = self.raw_dir(host)
        return dataclasses.replace(
            result, stdout_path=str(directory / f"{name}{STDOUT_SUFFIX}") if result.stdout_path else None,
            stderr_path=str(directory / f"{name}{STDERR_SUFFIX}") if result.stderr_path else None)

    def write_facts(self, host: str, doc: Mapping[str, Any]) -> bytes:
        """Compact JSON (_facts_json()), renamed into place; not fsynced one by one: sync() flushes the whole run
        once, before the manifest says complete. Returns the bytes written."""
        with writing(self.facts_path(host)):
            return self._write_facts(host, doc)

    def _write_facts(self, host: str, doc: Mapping[str, Any]) -> bytes:
        path = refuse_links(self.root, self.facts_path(host))
        tmp = path.with_name(f".{path.name}.tmp")
        data = facts_bytes(doc)
        _write_all(create_private(tmp, FILE_MODE), data)
        os.replace(tmp, path)
        return data

    def write_fabric(self, doc: Mapping[str, Any]) -> None:
        """The fabric document (compact JSON: a 2,000-host fabric has ~20,000 links), owner-only, renamed into place."""
        from .fsutil import atomic_write_text

        with writing(self.fabric_path):
            atomic_write_text(refuse_links(self.root, self.fabric_path),
                              json.dumps(doc, separators=(",", ":")) + "\n", mode=FILE_MODE)

    def fabric(self) -> dict[str, Any] | None:
        """The run's fabric document; None when the run read no fabric."""
        try:
            doc = json.loads(self.fabric_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as exc:
            raise InputError(Problem(f"not JSON: {exc}", str(self.fabric_path))) from None
        return doc if isinstance(doc, dict) else None

    def sync(self) -> None:
        """syncfs(2) on the run directory's file system: one flush for all the evidence of a run. The storage
        failing the flush (EIO: written pages are lost) is a WriteError naming the run directory."""
        import ctypes  # here, not at import: most commands that load the run store never sync a run

        libc = ctypes.CDLL(None, use_errno=True)  # this process's libc (dlopen(NULL)): no ldconfig lookup
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if getattr(libc, "syncfs", None) is not None:
                if libc.syncfs(fd) == 0:
                    return
                code = ctypes.get_errno()
                if code in STORAGE_ERRNOS:
                    raise WriteError(self.root, os.strerror(code), code)
            os.sync()  # no syncfs (not glibc): flush everything, still once per run
        finally:
            os.close(fd)

    def discard_staging(self) -> None:
        """Remove what writes cut short left hidden (a host's staged evidence, a facts temp file): after a full
        disk this frees the room run.json needs to say why the run stopped."""
        for pattern in (f"{RAW_DIR}/.*.partial", f"{FACTS_DIR}/.*.tmp"):
            for path in self.root.glob(pattern):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------ reading
    def manifest(self) -> dict[str, Any] | None:
        """run.json, checked against schemas/run.schema.json (exit 2 naming the file, line and path when it
        is not one); None for a directory of evidence without a manifest."""
        if not self.manifest_path.is_file():
            return None
        doc = documents.load_json(self.manifest_path)
        documents.validate(doc, "run")
        return doc.data

    def manifest_text(self) -> str:
        return self.manifest_path.read_text(encoding="utf-8")

    def recorded_errors(self) -> dict[str, dict[str, str]]:
        """host -> {kind, message} for every host the run could not collect."""
        doc = self.manifest()
        return dict((doc or {}).get("errors") or {})

    def recorded_commands(self) -> list[str]:
        """The names (collector ids) of the commands the run ran, in their order."""
        doc = self.manifest()
        return [c["id"] for c in (doc or {}).get("collectors") or []]

    def hosts(self) -> list[str]:
        """Every host the run holds evidence or a recorded error for (by host name: run.json maps made file names
        back)."""
        raw = self.root / RAW_DIR
        doc = self.manifest() or {}
        named = {f: h for h, f in (doc.get("evidence_names") or {}).items()}
        seen = {named.get(p.name, p.name) for p in raw.iterdir()
                if p.is_dir() and not p.name.startswith(".")} if raw.is_dir() else set()
        return sorted(seen | set(doc.get("errors") or {}))

    def has_evidence(self, host: str) -> bool:
        return self.raw_dir(host).is_dir()

    def has_output(self, host: str, name: str) -> bool:
        return (self.raw_dir(host) / f"{name}{STDOUT_SUFFIX}").is_file()

    def meta(self, host: str) -> dict[str, Any]:
        """raw/<host>/meta.json; {} for a hand-made evidence directory (outputs only). ValueError when it is
        not a JSON object."""
        path = self.raw_dir(host) / META_FILE
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{path} is not a JSON object")
        return doc

    def read(self, host: str, name: str, meta: Mapping[str, Any]) -> Recorded | None:
        """What command `name` printed on `host` and how it ended; None when the run holds nothing of it.
        Without a meta record (hand-made evidence) the command counts as having exited 0."""
        directory = self.raw_dir(host)
        record = meta.get(name) if isinstance(meta.get(name), dict) else {}
        out_path = directory / f"{name}{STDOUT_SUFFIX}"
        if not out_path.is_file() and not record:
            return None
        stdout, stdout_bytes = decoded(out_path.read_bytes()) if out_path.is_file() else ("", None)
        err_path = directory / f"{name}{STDERR_SUFFIX}"
        stderr, stderr_bytes = decoded(err_path.read_bytes()) if err_path.is_file() else ("", None)
        return Recorded(stdout, stderr, record.get("exit_code", 0) if record else 0,
                        float(record.get("duration_s") or 0.0), record.get("error"), stdout_bytes, stderr_bytes)


def _place(at: int, name: str, data: bytes, spilled: str | None, always: bool) -> int:
    """One output into the staging directory open as `at`: its spilled file renamed there, else its bytes written
    (not at all when empty, unless `always`). Returns its size in bytes."""
    if spilled is not None:
        os.rename(spilled, name, dst_dir_fd=at)
        return os.stat(name, dir_fd=at, follow_symlinks=False).st_size
    if data or always:
        _write_at(at, name, data)
    return len(data)


def _write_at(at: int, name: str, data: bytes) -> None:
    """One new evidence file `name` in the directory open as `at`, owner-only: three system calls (open, write,
    close), never through a link (O_NOFOLLOW; O_EXCL: the staging directory is new, so nothing is there to
    replace). Not fsynced one by one (~30 files a host): the whole file system is synced once before the manifest
    records the run as complete."""
    _write_all(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                       dir_fd=at), data)


def _write_all(fd: int, data: bytes) -> None:
    """All of `data` to the new file open as fd, then closed (a short write goes on where it stopped; a full disk
    raises)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
