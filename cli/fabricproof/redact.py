"""Secrets never leave the inventory: which host vars carry one, and taking their values out of any text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Ansible's connection and privilege-escalation secrets (ansible_password, ansible_ssh_pass,
#: ansible_become_password, ansible_sudo_pass, ansible_ssh_private_key_passphrase, ...) and any var a site
#: names like one (bmc_password, vault_token, api_secret).
_SECRET_NAME = re.compile(r"pass|secret|token|credential|api_?key", re.IGNORECASE)
#: `name=value` / `name: value` / `"name": "value"` with a secret-looking name, as tools print settings back.
_ASSIGNMENT = re.compile(
    r"""(?P<name>["']?[\w.-]*(?:pass|secret|token|credential|api_?key)[\w.-]*["']?)(?P<sep>\s*[:=]\s*)"""
    r"""(?P<value>"[^"]*"|'[^']*'|[^\s,;}'"]+)""", re.IGNORECASE)
MASK = "<redacted>"
_MIN_LENGTH = 3  # shorter values ("1", "no") would blank out ordinary words


def is_secret_var(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_values(host_vars: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every value of a secret-bearing var in these hosts' vars."""
    return {str(v) for hv in host_vars for k, v in hv.items()
            if v is not None and is_secret_var(str(k)) and len(str(v)) >= _MIN_LENGTH}


def assignments(text: str) -> str:
    """Mask the values of secret-looking `name=value` pairs: for text we cannot match against known values
    (Ansible's own error messages, an inventory line quoted back)."""
    return _ASSIGNMENT.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)


class Redactor:
    """Takes known secret values, and secret-looking assignments, out of text (messages, reasons, reports)."""

    def __init__(self, values: Iterable[str] = ()):
        # Longest first, so a secret that contains another is masked whole.
        self.values = sorted({v for v in values if len(v) >= _MIN_LENGTH}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return assignments(text)
