"""Defaults for --baseline and --inventory: the option, else an environment variable, else fabricproof.yaml."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from . import documents
from .errors import InputError, Problem

#: The config file: named by $FABRICPROOF_CONFIG, else fabricproof.yaml in the working directory.
CONFIG_ENV = "FABRICPROOF_CONFIG"
FILE_NAME = "fabricproof.yaml"
#: setting -> (its option, its environment variable).
SETTINGS: dict[str, tuple[str, str]] = {
    "baseline": ("--baseline", "FABRICPROOF_BASELINE"),
    "inventory": ("--inventory", "FABRICPROOF_INVENTORY"),
}


@dataclass(frozen=True)
class Setting:
    """One setting's effective value and where it came from ("--baseline", "$FABRICPROOF_BASELINE", "FILE:LINE")."""

    name: str
    value: str | None
    source: str


def config_file() -> Path | None:
    """The config file in effect: $FABRICPROOF_CONFIG (which must exist), else ./fabricproof.yaml if there is one."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named)
    here = Path(FILE_NAME)
    return here if here.is_file() else None


def read_file(path: Path) -> dict[str, Setting]:
    """The settings a config file names, paths made relative to the file's directory; InputError (exit 2) with
    file, line and JSON path for anything else."""
    doc = documents.load_yaml(path)
    if not isinstance(doc.data, dict):
        raise InputError(doc.problem((), f"expected a mapping of settings ({', '.join(SETTINGS)})"))
    problems: list[Problem] = []
    out: dict[str, Setting] = {}
    for key, value in doc.data.items():
        if key not in SETTINGS:
            hint = difflib.get_close_matches(str(key), SETTINGS, n=1)
            tip = f"; did you mean {hint[0]!r}?" if hint else f"; allowed: {', '.join(SETTINGS)}"
            problems.append(doc.problem((key,), f"unknown key {key!r}{tip}"))
        elif not isinstance(value, str) or not value.strip():
            problems.append(doc.problem((key,), f"{key} must be a path, got {value!r}"))
        else:
            # A path in the file is relative to the file, so the file works from any working directory.
            resolved = value if Path(value).is_absolute() else os.path.normpath(path.parent / value)
            out[key] = Setting(key, resolved, f"{path}:{doc.line((key,))}")
    if problems:
        raise InputError(problems)
    return out


def resolve(name: str, given: str | Path | None) -> Setting:
    """A setting's value: the option if given, else its environment variable, else the config file, else None.
    The config file is read only when it is needed."""
    option, env = SETTINGS[name]
    if given is not None:
        return Setting(name, str(given), option)
    if os.environ.get(env):
        return Setting(name, os.environ[env], f"${env}")
    path = config_file()
    if path is not None:
        found = read_file(path).get(name)
        if found is not None:
            return found
    return Setting(name, None, "not set")


def effective() -> list[Setting]:
    """Every setting as a command given no option would take it; a bad config file is an InputError."""
    path = config_file()
    if path is not None:
        read_file(path)  # refuse a bad file even where an environment variable wins over it
    return [resolve(name, None) for name in SETTINGS]


def baseline(given: Path | None) -> Path:
    """--baseline, or its default; exit 2 saying how to give one when there is none."""
    value = resolve("baseline", given).value
    if value is None:
        option, env = SETTINGS["baseline"]
        raise InputError(f"no baseline: give {option}/-b FILE, set ${env}, or name it in {FILE_NAME} "
                         f"(`fabricproof init DIR` writes one)")
    return Path(value)


def inventory(given: str | None) -> str | None:
    """--inventory, or its default (None when there is none: the command decides whether it needs one)."""
    return resolve("inventory", given).value
