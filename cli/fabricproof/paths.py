"""Where the shipped data (checks, schemas, playbooks, example inventories) lives."""

from __future__ import annotations

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
