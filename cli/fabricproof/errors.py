"""Input errors that name the file, the line and the JSON path (exit 2), and failed writes of our own files (exit 6)."""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar


@dataclass
class Problem:
    """One thing wrong with an input document."""

    message: str
    file: str = ""
    line: int | None = None
    pointer: str = ""

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line:
            where += f":{self.line}"
        at = f" at {self.pointer}" if self.pointer else ""
        return f"{where}:{at} {self.message}" if at else f"{where}: {self.message}"


class InputError(Exception):
    """Invalid baseline, check, plan, inventory or facts: nothing was touched."""

    def __init__(self, problems: list[Problem] | Problem | str):
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


#: What the storage answers when it, not the operator's input, is at fault: full, over quota, too big, failing, or
#: remounted read-only after errors. Other OSErrors (a missing directory, permissions) keep their own handling.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


class WriteError(OSError):
    """A file fabricproof writes (evidence, facts, run.json, state, decisions, reports) could not be written
    because of the storage: the CLI prints one line naming the path and exits 6. An OSError still (errno, filename),
    so cleanup that tolerates a failing disk (`suppress(OSError)`) tolerates it too."""

    def __init__(self, path: Path | str, reason: str, code: int = errno.EIO):
        super().__init__(code, reason, str(path))
        self.path = str(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.reason, self.errno)


@contextmanager
def writing(path: Path | str) -> Iterator[None]:
    """Turn the storage failing under a write of `path` into WriteError naming it (other OSErrors pass through)."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, WriteError) or exc.errno not in STORAGE_ERRNOS:
            raise  # a WriteError already names the file that failed
        raise WriteError(path, exc.strerror or str(exc), exc.errno) from None


F = TypeVar("F", bound=Callable[..., Any])


def writes(fn: F) -> F:
    """`writing` around a function whose first argument is the path it writes."""

    @functools.wraps(fn)
    def wrapper(path: Path | str, *args: Any, **kwargs: Any) -> Any:
        with writing(path):
            return fn(path, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
