"""Where everything of one lab lives inside its directory, and where the default lab directory is."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# FHS: variable state of a system service. Non-root users get the XDG state directory instead.
ROOT_DEFAULT_DIR = Path("/var/lib/fabricproof/lab")
# The lab user's home is shared by every lab on the machine, so it must not live inside one lab
# directory: purging that lab would leave the user homeless, and sshd then prints
# "Could not chdir to home directory" on the stderr of every command run in the other labs.
LAB_HOME = Path("/var/lib/fabricproof/lab-home")


def default_lab_dir(euid: int | None = None, environ: dict[str, str] | None = None) -> Path:
    """The lab directory used when `--dir` is not given."""
    env = os.environ if environ is None else environ
    if (os.geteuid() if euid is None else euid) == 0:
        return ROOT_DEFAULT_DIR
    state_home = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".local" / "state")
    return Path(state_home) / "fabricproof" / "lab"


@dataclass(frozen=True)
class LabLayout:
    """Paths inside one lab directory (absolute: sshd re-execs itself from / and needs them so)."""

    root: Path

    @classmethod
    def at(cls, directory: Path) -> LabLayout:
        return cls(Path(os.path.abspath(directory)))

    @property
    def state(self) -> Path:
        return self.root / "lab.json"

    @property
    def lock(self) -> Path:
        return self.root / ".lab.lock"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def host_key(self) -> Path:
        return self.keys / "ssh_host_ed25519_key"

    @property
    def client_key(self) -> Path:
        return self.keys / "id_ed25519"

    @property
    def authorized_keys(self) -> Path:
        return self.keys / "authorized_keys"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.yml"

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"

    @property
    def sshd(self) -> Path:
        return self.root / "sshd"

    def sshd_config(self, group: int) -> Path:
        return self.sshd / f"sshd-{group:03d}.conf"

    def sshd_log(self, group: int) -> Path:
        return self.sshd / f"sshd-{group:03d}.log"

    @property
    def nodes(self) -> Path:
        return self.root / "nodes"

    def node_dir(self, address: str) -> Path:
        return self.nodes / address

    def host_root(self, address: str) -> Path:
        return self.node_dir(address) / "root"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def node_python(self) -> Path:
        """On the nodes' PYTHONPATH (the lab's sshd sets it): holds the lab's sitecustomize (zipcache.py)."""
        return self.root / "lib" / "node-python"

    @property
    def zipcache(self) -> Path:
        """Compiled code of what Ansible's modules import from their zip, kept for the lab's nodes (zipcache.py)."""
        return self.root / "zipcache"
