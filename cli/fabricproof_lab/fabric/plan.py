"""The cabling plan of a lab fabric, as the FabricPlan document the lab writes to fabric-plan.yaml (pure)."""

from __future__ import annotations

from typing import Any

import yaml

from .topology import Fabric

PLAN_FILE = "fabric-plan.yaml"


def document(fabric: Fabric) -> dict[str, Any]:
    """The explicit link list (the contract's form): every cable of the healthy fabric, host cables first, ends named
    as an operator names them (a CA by its node description, a switch by its short name)."""
    names = fabric.names()
    links = []
    for cable in fabric.cables:
        link: dict[str, Any] = {"a": names[cable.a[0]], "a_port": cable.a[1], "b": names[cable.b[0]],
                                "b_port": cable.b[1]}
        if cable.width != "4x":
            link["width"] = cable.width
        if cable.speed != fabric.speed:
            link["speed"] = cable.speed
        links.append(link)
    return {"kind": "FabricPlan", "version": 1, "name": "lab", "defaults": {"width": "4x", "speed": fabric.speed},
            "links": links}


def render(fabric: Fabric, lab_dir: str) -> str:
    header = (f"# The cabling plan of the fabricproof lab's InfiniBand fabric in {lab_dir}.\n"
              f"# Written by `fabricproof lab up --fabric`: {len(fabric.cables)} cables, the fabric as generated "
              f"(lab faults change the fabric, never this plan).\n")
    doc = document(fabric)
    body = yaml.safe_dump({k: v for k, v in doc.items() if k != "links"}, sort_keys=False, default_flow_style=None)
    lines = "".join("  - " + yaml.safe_dump(link, default_flow_style=True, sort_keys=False, width=200).strip() + "\n"
                    for link in doc["links"])
    return header + body + "links:\n" + lines
