"""`nvfwupd show_version` (text or -j JSON) or a Redfish FirmwareInventory: HGX baseboard firmware versions."""

from __future__ import annotations

import json
import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, Requires, guarded
from ..fragments import array, boolean, choice, mapping, obj, string
from ..textutil import natural_key, strip_ansi

_FW_COLUMNS = {"AP Name": "name", "Sys Version": "version", "Pkg Version": "package_version", "Up-To-Date": "up_to_date"}
_NA = {"", "N/A", "NA", "NONE", "-"}


def _na(value: Any) -> str | None:
    # Not textutil.na_to_none: values also come from JSON (numbers are stringified), "-" means no value
    # too, and bracketed text is kept as printed rather than read as nvidia-smi's "[N/A]".
    if value is None:
        return None
    v = str(value).strip()
    return None if v.upper() in _NA else v


def _yes_no(value: Any) -> bool | None:
    v = (_na(value) or "").lower()
    return True if v == "yes" else False if v == "no" else None


def parse_nvfwupd(text: str) -> dict[str, Any]:
    """Parse `nvfwupd show_version` text, its `-j` JSON, or a Redfish FirmwareInventory document.

    Formats: the "Firmware Devices:" table (AP Name / Sys Version / Pkg Version / Up-To-Date) of
    https://docs.nvidia.com/dgx/dgxh100-fw-update-guide/view-fw-components-packages.html, the JSON of
    https://docs.nvidia.com/multi-node-nvlink-systems/nvfupd-guide/appendix/json-options.html, and
    GET /redfish/v1/UpdateService/FirmwareInventory?$expand=. (Members carry Id and Version).
    """
    body = strip_ansi(text).strip()
    if not body:
        raise ParseError("empty output")
    if body[0] in "{[":
        try:
            doc = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ParseError(f"invalid JSON: {exc.msg} at line {exc.lineno}") from None
        components, model, source = _from_json(doc)
    else:
        components, model = _from_table(body)
        source = "nvfwupd"
    components.sort(key=lambda c: natural_key(c["name"]))

    def versions(prefix: str) -> list[str]:
        return [c["version"] for c in components if c["name"].startswith(prefix) and c["version"]]

    return {
        "source": source,
        "system_model": model,
        "components": components,
        "versions": {c["name"]: c["version"] for c in components},
        "nvswitch_versions": versions("HGX_FW_NVSwitch_"),
        "gpu_versions": versions("HGX_FW_GPU_"),
    }


def _from_table(body: str) -> tuple[list[dict[str, Any]], str | None]:
    lines = body.replace("\r", "").split("\n")
    model = None
    for line in lines:
        if line.strip().startswith("System Model:"):
            model = _na(line.split(":", 1)[1])
    hdr_at = next((i for i, line in enumerate(lines) if line.strip().startswith("AP Name")), None)
    if hdr_at is None:
        reason = next((line.strip() for line in lines if "error" in line.lower()), lines[0].strip())
        raise ParseError(f"no 'Firmware Devices' table: {reason[:160]}")
    header = lines[hdr_at].rstrip()
    names = re.split(r"\s{2,}", header.strip())
    starts = [header.index(n) for n in names]
    keys = [_FW_COLUMNS.get(n, n) for n in names]
    components = []
    for line in lines[hdr_at + 1 :]:
        stripped = line.strip()
        if not stripped or set(stripped) <= {"-", " "}:
            # a blank line ends the table once rows have started (later text is not a row)
            if not stripped and components:
                break
            continue
        tokens = stripped.split()
        if tokens[0].endswith(":"):
            break  # a "Key: value" line after the table (status or error text) is not a row
        if len(tokens) != len(keys):
            # fall back to the header's column positions when a cell is empty or holds spaces
            bounds = [*starts[1:], None]
            tokens = [line[s:e].strip() for s, e in zip(starts, bounds)]
        row = dict(zip(keys, tokens))
        components.append(_component(row.get("name"), row.get("version"), row.get("package_version"), row.get("up_to_date")))
    if not components:
        raise ParseError("'Firmware Devices' table has no rows")
    return components, model


def _component(name: Any, version: Any, package_version: Any, up_to_date: Any) -> dict[str, Any]:
    if not name:
        raise ParseError("firmware component without a name")
    return {
        "name": str(name),
        "version": _na(version),
        "package_version": _na(package_version),
        "up_to_date": _yes_no(up_to_date),
    }


def _from_json(doc: Any) -> tuple[list[dict[str, Any]], str | None, str]:
    if isinstance(doc, dict) and isinstance(doc.get("Firmware Devices"), list):
        rows = [r for r in doc["Firmware Devices"] if isinstance(r, dict)]
        comps = [_component(r.get("AP Name"), r.get("Sys Version"), r.get("Pkg Version"), r.get("Up-To-Date")) for r in rows]
        return comps, _na(doc.get("System Model")), "nvfwupd"
    if isinstance(doc, dict) and isinstance(doc.get("Members"), list):
        members = [m for m in doc["Members"] if isinstance(m, dict)]
    elif isinstance(doc, dict) and "Version" in doc and ("Id" in doc or "@odata.id" in doc):
        members = [doc]  # a single SoftwareInventory resource
    else:
        raise ParseError("JSON is neither nvfwupd show_version output nor a Redfish FirmwareInventory")
    comps = []
    for m in members:
        name = m.get("Id") or str(m.get("@odata.id", "")).rstrip("/").rsplit("/", 1)[-1]
        # An unexpanded collection lists only @odata.id links: names without versions.
        comps.append(_component(name, m.get("Version"), None, None))
    return comps, None, "redfish"


_COMPONENT = obj(
    "One firmware component.",
    {
        "name": string("Component name (nvfwupd AP Name or Redfish Id), e.g. HGX_FW_NVSwitch_0."),
        "version": string("Installed version ('Sys Version' / Redfish Version).", True),
        "package_version": string("Version in the compared package; null without a package or when N/A.", True),
        "up_to_date": boolean("nvfwupd 'Up-To-Date' Yes/No; null when not compared.", True),
    },
)

NVSWITCH_FIRMWARE_SCHEMA: dict[str, Any] = obj(
    "HGX baseboard firmware inventory.",
    {
        "source": choice("Which format the inventory came in.", ["nvfwupd", "redfish"]),
        "system_model": string("nvfwupd 'System Model' (e.g. DGXH100).", True),
        "components": array("Components in natural name order.", _COMPONENT),
        "versions": mapping(
            "Installed version per component name (baseline key fw.hgx.<component>).",
            string("Installed version.", True),
        ),
        "nvswitch_versions": array("Installed versions of the HGX_FW_NVSwitch_* components.", string("Version.")),
        "gpu_versions": array("Installed versions of the HGX_FW_GPU_* components.", string("Version.")),
    },
)

# nvfwupd reads the BMC address and Redfish credentials (BMC_IP, RF_USERNAME, RF_PASSWORD, and
# TargetPlatform) from this YAML file, so no secret ever appears in argv, process lists or
# evidence. Operators provision it per host (mode 0600, root) with their secret tooling; adding
# FWUpdateFilePath makes show_version compare against a package and fill Pkg Version/Up-To-Date.
NVFWUPD_REQUIRES = Requires("file", tools.NVFWUPD_CONFIG, "NVSwitch firmware not checked")

NVSWITCH_FIRMWARE = Collector(
    id="nvswitch_firmware",
    # Most nodes have no BMC credentials provisioned: without the file the firmware is not checked (skip), which
    # is not a collection failure (exit 3 stays for real ones).
    argv=guarded(NVFWUPD_REQUIRES, *tools.argv("nvswitch_firmware")),
    requires=NVFWUPD_REQUIRES,
    parse=parse_nvfwupd,
    provides="/nvswitch/firmware",
    schema=NVSWITCH_FIRMWARE_SCHEMA,
    family="nvswitch",
    description=(
        "HGX firmware versions (NVSwitch, GPU, ERoT...) via `nvfwupd -c /etc/fabricproof/nvfwupd.yaml show_version`; "
        "the YAML holds BMC_IP, RF_USERNAME and RF_PASSWORD, provisioned by the operator (mode 0600)."
    ),
    platforms=("h100", "h200", "b200", "gb200"),
)

COLLECTORS = (NVSWITCH_FIRMWARE,)
