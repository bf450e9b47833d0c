"""The lab nodes' zip-import cache (fabricproof_lab.zipcache): what a module imports from a zip is compiled once, and a
hit behaves as a fresh compile (same code, the current zip's file name in tracebacks). Pure: temporary files only."""

from __future__ import annotations

import hashlib
import os
import sys
import traceback
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pytest
from fabricproof_lab import zipcache

SOURCE = '''
def fail(x):
    def inner():
        raise ValueError(f"bad {x}")
    return inner()

VALUE = 41 + 1
'''


class Compiles:
    """zipimport's own compile step, counting its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.real = zipimport._compile_source

    def __call__(self, pathname: str, source: bytes):  # noqa: ANN204 - zipimport's signature
        self.calls.append(pathname)
        return self.real(pathname, source)


@pytest.fixture
def compiles(tmp_path: Path) -> Iterator[tuple[Compiles, Path]]:
    """The cache installed over a counting compile step, undone afterwards (zipimport, sys.path, sys.modules)."""
    real, path = zipimport._compile_source, list(sys.path)
    counter = Compiles()
    cache = tmp_path / "cache"
    cache.mkdir()
    zipimport._compile_source = counter
    assert zipcache.install(str(cache))
    try:
        yield counter, cache
    finally:
        zipimport._compile_source = real
        sys.path[:] = path
        sys.modules.pop("zc_probe", None)
        sys.modules.pop("zc_probe.mod", None)
        sys.path_importer_cache.clear()


def _zip(where: Path, source: str = SOURCE) -> Path:
    """A payload laid out like Ansible's: a package inside a zip under a fresh temporary name."""
    where.mkdir(parents=True)
    archive = where / "ansible_command_payload.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zc_probe/__init__.py", "")
        z.writestr("zc_probe/mod.py", source)
    return archive


def _import(archive: Path):  # noqa: ANN202 - a module
    sys.modules.pop("zc_probe", None)
    sys.modules.pop("zc_probe.mod", None)
    sys.path.insert(0, str(archive))
    try:
        import zc_probe.mod

        return zc_probe.mod
    finally:
        sys.path.remove(str(archive))


def _trace(module) -> str:  # noqa: ANN001
    try:
        module.fail(7)
    except ValueError:
        return traceback.format_exc()
    raise AssertionError("fail() did not raise")


def test_a_module_is_compiled_once_and_a_hit_names_the_zip_it_was_imported_from(compiles, tmp_path: Path) -> None:
    counter, cache = compiles
    first, second = _zip(tmp_path / "task-1"), _zip(tmp_path / "task-2")
    one = _import(first)
    assert [Path(p).name for p in counter.calls] == ["__init__.py", "mod.py"]
    assert len(os.listdir(cache)) == 2
    two = _import(second)
    assert len(counter.calls) == 2, "the second task's import compiled again"
    assert two.VALUE == 42 and two is not one
    trace = _trace(two)
    assert f"{second}{os.sep}zc_probe{os.sep}mod.py" in trace and "in inner" in trace and "bad 7" in trace
    assert str(first) not in trace
    assert two.fail.__code__.co_consts  # the nested function's code was renamed too:
    nested = [c for c in two.fail.__code__.co_consts if hasattr(c, "co_filename")]
    assert nested and all(c.co_filename == two.fail.__code__.co_filename == two.__file__ for c in nested)


def test_changed_source_is_compiled_again(compiles, tmp_path: Path) -> None:
    counter, cache = compiles
    _import(_zip(tmp_path / "a"))
    changed = _import(_zip(tmp_path / "b", SOURCE.replace("41 + 1", "40 + 3")))
    assert changed.VALUE == 43
    assert [Path(p).name for p in counter.calls] == ["__init__.py", "mod.py", "mod.py"]
    assert len(os.listdir(cache)) == 3


def test_a_corrupt_entry_is_compiled_again_and_replaced(compiles, tmp_path: Path) -> None:
    counter, cache = compiles
    _import(_zip(tmp_path / "a"))
    for entry in cache.iterdir():
        entry.write_bytes(entry.read_bytes()[:7])  # cut short, as by a full disk
    again = _import(_zip(tmp_path / "b"))
    assert again.VALUE == 42 and len(counter.calls) == 4
    assert _import(_zip(tmp_path / "c")).VALUE == 42 and len(counter.calls) == 4  # rewritten whole: hits again


def test_a_cache_that_refuses_the_write_costs_speed_never_the_import(compiles, tmp_path: Path) -> None:
    counter, cache = compiles
    # Each entry's name taken by a directory: the entry cannot be read or put in place (as on a full or read-only
    # disk). The imports still work, compiling every time, and no temporary file is left behind.
    for inner, source in (("zc_probe/__init__.py", b""), ("zc_probe/mod.py", SOURCE.encode())):
        key = hashlib.sha1(inner.encode() + b"\0" + source).hexdigest()
        (cache / f"{sys.implementation.cache_tag}-{key}").mkdir()
    taken = sorted(os.listdir(cache))
    assert _import(_zip(tmp_path / "a")).VALUE == 42
    compiled = len(counter.calls)
    assert _import(_zip(tmp_path / "b")).VALUE == 42
    assert len(counter.calls) == 2 * compiled
    assert sorted(os.listdir(cache)) == taken


def test_sources_outside_a_zip_pass_through_uncached(compiles) -> None:
    counter, cache = compiles
    code = zipimport._compile_source("/srv/plain/mod.py", b"X = 1\n")
    assert code.co_filename == "/srv/plain/mod.py" and counter.calls == ["/srv/plain/mod.py"]
    assert not os.listdir(cache)


def test_install_changes_nothing_without_a_cache_directory(tmp_path: Path) -> None:
    real = zipimport._compile_source
    assert zipcache.install(str(tmp_path / "absent")) is False
    assert zipimport._compile_source is real
