"""ibsim's topology file (ibnetdiscover's own format) for a lab fabric, and what ibsim cannot model (pure)."""

from __future__ import annotations

from .topology import Ca, Cable, Fabric, Switch

#: ibsim parses link speeds up to HDR only (an NDR line falls back to SDR). In an NDR fabric every speed is given to
#: ibsim one generation lower, and emulate.py raises the real tools' output by the same step.
SIM_STEP_DOWN = {"NDR": "HDR", "HDR": "EDR", "EDR": "FDR"}
_DEVID = {"NDR": "0x1021", "HDR": "0x101b"}  # ConnectX-7, ConnectX-6
#: ibsim's enabled-speed bits as its parser sets them for a "4xHDR" port line (LinkSpeedEnabled SDR|DDR|QDR, then
#: LinkSpeedExtEnabled FDR=1, EDR=2, HDR=4, each speed with those below it) and 1x|4x for the width.
_EXT_BITS = {"FDR": 1, "EDR": 3, "HDR": 7}
_SPEED_BITS = 7
_WIDTH_4X = 3


def shifted(fabric: Fabric) -> bool:
    """True when ibsim runs this fabric one speed generation down (NDR is beyond what it parses)."""
    return fabric.speed == "NDR"


def sim_speed(fabric: Fabric, speed: str) -> str:
    return SIM_STEP_DOWN[speed] if shifted(fabric) else speed


def _link(fabric: Fabric, cable: Cable) -> str:
    return f"{cable.width}{sim_speed(fabric, cable.speed)}"


def render(fabric: Fabric) -> str:
    """The net file: the SM's spine first (ibsim attaches opensm to the first node), every node a block of its own
    (a link to a node without one makes ibsim panic), both ends of a cable with the same width and speed."""
    names = {s.node_id: s for s in fabric.switches}
    cas = {c.node_id: c for c in fabric.cas}
    lids = {**{k: s.lid for k, s in names.items()}, **{k: c.lid for k, c in cas.items()}}
    descs = {**{k: s.desc for k, s in names.items()}, **{k: c.name for k, c in cas.items()}}
    by_end: dict[tuple[str, int], tuple[tuple[str, int], Cable]] = {}
    for cable in fabric.cables:
        by_end[cable.a] = (cable.b, cable)
        by_end[cable.b] = (cable.a, cable)
    out = ["# fabricproof lab fabric: ibsim topology (ibnetdiscover format). Written by `fabricproof lab up`.", "",
           # every port of the nodes below, spare ones too, enabled at the fabric's width and speed: a cable linked
           # later through ibsim's console (a fault's extra cable) trains at them rather than at ibsim's 4x SDR
           f"width={_WIDTH_4X}", f"speed={_SPEED_BITS}", f"extspeed={_EXT_BITS[sim_speed(fabric, fabric.speed)]}", ""]
    for sw in fabric.switches:
        out += _switch_block(fabric, sw, by_end, lids, descs, cas)
    for ca in fabric.cas:
        out += _ca_block(fabric, ca, by_end, lids, descs)
    return "\n".join(out) + "\n"


def _switch_block(fabric: Fabric, sw: Switch, by_end, lids, descs, cas) -> list[str]:
    out = ["vendid=0x2c9", "devid=0xd2f2" if sw.model == "MQM9700" else "devid=0xd2f0",
           f"sysimgguid={sw.guid}", f"switchguid={sw.guid}({sw.guid[2:]})",
           f'Switch\t{sw.ports + 1} "{sw.node_id}"\t\t# "{sw.desc}" enhanced port 0 lid {sw.lid} lmc 0']
    for port in range(1, sw.ports + 2):
        found = by_end.get((sw.node_id, port))
        if found is None:
            continue
        (peer, pport), cable = found
        guid = f"({cas[peer].port_guid[2:]}) " if peer in cas else ""
        out.append(f'[{port}]\t"{peer}"[{pport}]{guid}\t\t# "{descs[peer]}" lid {lids[peer]} {_link(fabric, cable)}')
    return out + [""]


def _ca_block(fabric: Fabric, ca: Ca, by_end, lids, descs) -> list[str]:
    out = ["vendid=0x2c9", f"devid={_DEVID.get(ca.speed, '0x1021')}", f"sysimgguid={ca.guid}", f"caguid={ca.guid}",
           f'Ca\t1 "{ca.node_id}"\t\t# "{ca.name}"']
    found = by_end.get((ca.node_id, 1))
    if found is not None:
        (peer, pport), cable = found
        out.append(f'[1]({ca.port_guid[2:]}) \t"{peer}"[{pport}]\t\t# lid {ca.lid} lmc 0 "{descs[peer]}" '
                   f'lid {lids[peer]} {_link(fabric, cable)}')
    return out + [""]
