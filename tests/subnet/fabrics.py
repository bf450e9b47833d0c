"""Rail-optimised fabrics built as Subnets (what ibnetdiscover would show), for the plan diff's tests and benchmark."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from fabricproof.subnet.model import End, IdlePort, Node, Subnet, SubnetManager


class Builder:
    """A Subnet assembled by name: nodes get GUIDs in order, cables by (name, port)."""

    def __init__(self) -> None:
        self.subnet = Subnet()
        self.guids: dict[str, str] = {}
        self._next = itertools.count(1)

    def node(self, name: str, kind: str, desc: str, ports: int) -> str:
        guid = f"0x{0x0c42a10300000000 + next(self._next):016x}"
        self.subnet.nodes[guid] = Node(guid, kind, desc, ports, lid=len(self.guids) + 1)
        self.guids[name] = guid
        return guid

    def switch(self, name: str, ports: int = 64) -> str:
        return self.node(name, "switch", f"MF0;{name}:MQM8700/U1", ports)

    def ca(self, desc: str) -> str:
        return self.node(desc, "ca", desc, 1)

    def end(self, name: str, port: int) -> End:
        return End(self.guids[name], port)

    def cable(self, a: str, ap: int, b: str, bp: int, width: str = "4x", speed: str = "HDR", **kw) -> None:
        self.subnet.add_link(Subnet.cable(self.end(a, ap), self.end(b, bp), width=width, speed=speed, **kw))

    def unplug(self, name: str, port: int) -> None:
        """Take the cable at (name, port) out."""
        link = self.subnet.link_at(self.end(name, port))
        self.subnet.links.remove(link)
        del self.subnet._by_end[link.a], self.subnet._by_end[link.b]  # the index stays whole: no rebuild per cable

    def move(self, name: str, port: int, to: str, to_port: int, **kw) -> None:
        """The cable at (name, port) taken out and (name, port) cabled to (to, to_port) instead."""
        self.unplug(name, port)
        self.cable(name, port, to, to_port, **kw)

    def idle(self, name: str, port: int) -> None:
        self.subnet.idle_ports.append(IdlePort(self.end(name, port), "Down", "Polling"))


def rail_fabric(hosts: Sequence[str], su_size: int, rails: int, spines: int, uplinks: int, cores: int = 0,
                core_uplinks: int = 0) -> Builder:
    """HCA mlx5_r of host i of SU u on leaf-su{u}-r{r} port i+1; each leaf's `uplinks` cables round-robin over
    spine-1.. (each spine's ports in order), as fabricproof.subnet.plan.expand_rails plans them; with cores, each
    spine's `core_uplinks` cables round-robin over core-1.. after its leaf ports. One master SM."""
    fab = Builder()
    leaves: list[str] = []
    for i, host in enumerate(hosts):
        su = i // su_size + 1
        for r in range(rails):
            leaf = f"leaf-su{su}-r{r}"
            if leaf not in fab.guids:
                fab.switch(leaf, su_size + uplinks)
                leaves.append(leaf)
            fab.ca(f"{host} mlx5_{r}")
            fab.cable(f"{host} mlx5_{r}", 1, leaf, i % su_size + 1)
    names = [f"spine-{n}" for n in range(1, spines + 1)]
    per_spine = -(-len(leaves) * uplinks // spines) + core_uplinks
    for name in names:
        fab.switch(name, per_spine)
    used = dict.fromkeys(names, 0)
    n = 0
    for leaf in leaves:
        for k in range(uplinks):
            spine = names[n % spines]
            n += 1
            used[spine] += 1
            fab.cable(leaf, su_size + 1 + k, spine, used[spine])
    core_names = [f"core-{c}" for c in range(1, cores + 1)]
    for name in core_names:
        fab.switch(name, -(-spines * core_uplinks // cores))
    core_used = dict.fromkeys(core_names, 0)
    n = 0
    for spine in names if cores else ():
        for _ in range(core_uplinks):
            core = core_names[n % cores]
            n += 1
            core_used[core] += 1
            used[spine] += 1
            fab.cable(spine, used[spine], core, core_used[core])
    fab.subnet.sms.append(SubnetManager(fab.guids[leaves[0]], 1, 15, "SMINFO_MASTER"))
    return fab
