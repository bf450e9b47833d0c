"""What `fabricproof init` writes: a starter inventory, baseline, plan, runbook and config from the shipped examples."""

from __future__ import annotations

from pathlib import Path

from .errors import InputError
from .paths import inventories_dir, schemas_dir

#: The shipped example a starter's plan and runbook are made from (the lab's: they run against `fabricproof lab up`).
PLAN = "hca-firmware.yml"
AFTER = "baselines/lab-hca-fw-28.42.1000.yaml"
RUNBOOK = "isolate-failing-nodes.yml"
DEFAULT_PLATFORM = "lab"
CHANGE_ME = "CHANGE ME"
#: What the modelines point at: the schemas are copied beside the files, so the directory works in any editor and CI.
SCHEMAS = ".schemas"


def platforms() -> list[str]:
    """Every shipped example fleet with a baseline: inventories/<platform>/baseline.yaml."""
    return sorted(p.parent.name for p in inventories_dir().glob("*/baseline.yaml"))


def group_of(platform: str) -> str:
    """The inventory group the platform's hosts are in (the lab's plan changes its DGX H100 nodes)."""
    return "dgx_h100" if platform == DEFAULT_PLATFORM else platform.replace("-", "_")


def _modeline(text: str, schema: str, depth: int) -> str:
    """Point the example's first-line modeline at the copied schema, `depth` directories up."""
    first, _, rest = text.partition("\n")
    if not first.startswith("# yaml-language-server: $schema="):
        raise AssertionError(f"shipped example without a schema modeline: {first!r}")
    return f"# yaml-language-server: $schema={'../' * depth}{SCHEMAS}/{schema}.schema.json\n{rest}"


def _replace(text: str, old: str, new: str, source: Path) -> str:
    if text.count(old) != 1:  # the shipped examples changed under the starter: a test catches it before a user does
        raise AssertionError(f"{source}: expected {old!r} once")
    return text.replace(old, new)


def _inventory(group: str, platform: str) -> str:
    lab = (f"# For the emulated lab, use the inventory `fabricproof lab up` prints instead:\n"
           f"#   export FABRICPROOF_INVENTORY=\"$(fabricproof lab up --nodes 4 --profile dgx-h100)\"\n"
           if platform == DEFAULT_PLATFORM else "")
    return (f"# Starter inventory written by `fabricproof init`. {CHANGE_ME}: your hosts, how to reach them, their "
            f"groups.\n"
            f"# A host's groups select the baseline's spec.groups.<group> overrides; every host gets spec.defaults.\n"
            f"# Any inventory Ansible reads works (INI, a directory with group_vars, a dynamic script).\n"
            f"{lab}"
            f"all:\n"
            f"  children:\n"
            f"    {group}:\n"
            f"      hosts:\n"
            f"        node-0001: {{ansible_host: 192.0.2.1}}  # {CHANGE_ME}\n"
            f"        node-0002: {{ansible_host: 192.0.2.2}}  # {CHANGE_ME}\n")


def _config() -> str:
    return ("# fabricproof.yaml: defaults for --baseline/-b and --inventory/-i of the commands run in this directory\n"
            "# (or wherever $FABRICPROOF_CONFIG names this file). Paths are relative to this file. An option wins over\n"
            "# $FABRICPROOF_BASELINE / $FABRICPROOF_INVENTORY, which win over this file: `fabricproof config` shows which.\n"
            "baseline: baseline.yaml\n"
            f"inventory: inventory.yml  # {CHANGE_ME} if your inventory lives elsewhere\n")


def files(platform: str = DEFAULT_PLATFORM) -> dict[str, str]:
    """Relative path -> text of every file a starter directory holds, for one shipped platform (pure but for
    reading the shipped examples)."""
    known = platforms()
    if platform not in known:
        raise InputError(f"--platform {platform!r}: choose one of {', '.join(known)}")
    group = group_of(platform)
    examples = inventories_dir()
    out: dict[str, str] = {"fabricproof.yaml": _config(), "inventory.yml": _inventory(group, platform)}

    source = examples / platform / "baseline.yaml"
    text = _modeline(source.read_text(encoding="utf-8"), "baseline", 0)
    out["baseline.yaml"] = text.replace(f"inventories/{platform}/baseline.yaml", "baseline.yaml")

    source = examples / "lab" / "plans" / PLAN
    text = _modeline(source.read_text(encoding="utf-8"), "rollout", 1)
    text = _replace(text, "inventory: /var/lib/fabricproof/lab/inventory.yml",
                    f"inventory: ../inventory.yml  # {CHANGE_ME} with the config's inventory", source)
    text = _replace(text, "target: dgx_h100", f"target: {group}  # {CHANGE_ME}: the group this change is for", source)
    if platform == DEFAULT_PLATFORM:
        after = examples / "lab" / "plans" / AFTER
        out[f"plans/{AFTER}"] = _modeline(after.read_text(encoding="utf-8"), "baseline", 2)
    else:
        text = _replace(text, f"after: {AFTER}", f"after: ../baseline.yaml  # {CHANGE_ME}: the baseline the changed "
                        "hosts must prove (the new firmware's version)", source)
    out[f"plans/{PLAN}"] = _header(text, PLAN, "plan")

    source = examples / "lab" / "runbooks" / RUNBOOK
    text = _modeline(source.read_text(encoding="utf-8"), "runbook", 1)
    text = _replace(text, "inventory: /var/lib/fabricproof/lab/inventory.yml",
                    f"inventory: ../inventory.yml  # {CHANGE_ME} with the config's inventory", source)
    out[f"runbooks/{RUNBOOK}"] = _header(text, RUNBOOK, "runbook")

    for name in ("baseline", "rollout", "runbook"):
        out[f"{SCHEMAS}/{name}.schema.json"] = (schemas_dir() / f"{name}.schema.json").read_text(encoding="utf-8")
    return out


def _header(text: str, example: str, what: str) -> str:
    """A line after the modeline (which must stay first) saying where the file came from."""
    first, _, rest = text.partition("\n")
    return (f"{first}\n# Starter {what} written by `fabricproof init` from the shipped example {example}; "
            f"{CHANGE_ME} where marked.\n{rest}")
