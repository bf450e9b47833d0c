"""Where the shipped data (checks, schemas, playbooks, example inventories) lives."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def data_root() -> Path:
    """The directory holding checks/, schemas/, playbooks/ and inventories/.

    A wheel carries them inside the package (fabricproof/_data); a source checkout or an
    editable install finds them at the top of the repository.
    """
    bundled = _PACKAGE / "_data"
    if (bundled / "schemas").is_dir():
        return bundled
    return _PACKAGE.parent.parent


def checks_dir() -> Path:
    return data_root() / "checks"


def schemas_dir() -> Path:
    return data_root() / "schemas"


def inventories_dir() -> Path:
    return data_root() / "inventories"


def playbooks_dir() -> Path:
    return data_root() / "playbooks"


#: Where fabricproof keeps what must hold across every run on this machine, whatever the runs directory:
#: the host locks and reservations of rollouts. FABRICPROOF_STATE_DIR moves it (tests, non-root operators).
STATE_DIR_ENV = "FABRICPROOF_STATE_DIR"
DEFAULT_STATE_DIR = "/var/lib/fabricproof"
#: Under the state directory, owner-only: what a run may take from an earlier one (cache.py keeps it).
CACHE_DIR = "cache"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """$FABRICPROOF_STATE_DIR of `env` (default: this process's environment), else /var/lib/fabricproof."""
    return Path((os.environ if env is None else env).get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)
