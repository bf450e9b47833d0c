"""The one error type lab operations raise: a message an operator can act on, plus an exit code."""

from __future__ import annotations

from fabricproof.model import ExitCode


class LabError(Exception):
    """A lab operation could not be done; the message says why and what to do about it."""

    def __init__(self, message: str, exit_code: int = ExitCode.INVALID_INPUT) -> None:
        super().__init__(message)
        self.exit_code = int(exit_code)
