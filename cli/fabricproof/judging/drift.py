"""Drift between two collections of the same fleet: version changes and error-counter growth per host (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Facts = Mapping[str, Any]

#: IB counters that grow with traffic, not with trouble: their deltas are not drift.
IB_TRAFFIC_COUNTERS = frozenset({
    "port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets", "port_xmit_wait",
    "unicast_rcv_packets", "unicast_xmit_packets", "multicast_rcv_packets", "multicast_xmit_packets",
    "np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored",
})
NVLINK_COUNTERS = ("replay", "recovery", "crc")


@dataclass(frozen=True)
class Change:
    """One difference on one host between run A and run B."""

    host: str
    kind: str  # "version" or "counter"
    what: str  # e.g. "driver", "VBIOS GPU 3", "NVLink GPU 0 link 5 crc", "IB mlx5_0/1 symbol_error"
    before: Any
    after: Any
    delta: int | None = None  # counters only; after a reset (reboot) it is the new value
    reset: bool = False

    def as_dict(self) -> dict[str, Any]:
        d = {"host": self.host, "kind": self.kind, "what": self.what, "before": self.before, "after": self.after}
        if self.kind == "counter":
            d.update(delta=self.delta, reset=self.reset)
        return d


@dataclass(frozen=True)
class Drift:
    hosts_compared: tuple[str, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    changes: tuple[Change, ...] = field(default=())

    @property
    def any(self) -> bool:
        return bool(self.changes or self.only_in_a or self.only_in_b)

    def as_dict(self) -> dict[str, Any]:
        return {"hosts_compared": len(self.hosts_compared), "only_in_a": list(self.only_in_a),
                "only_in_b": list(self.only_in_b), "changes": [c.as_dict() for c in self.changes]}


def _get(doc: Any, *path: Any) -> Any:
    for p in path:
        if isinstance(doc, Mapping):
            doc = doc.get(p)
        else:
            return None
    return doc


def _items(doc: Any, *path: Any) -> list[Mapping[str, Any]]:
    value = _get(doc, *path)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _keyed(items: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any],
           value: Callable[[Mapping[str, Any]], Any]) -> dict[Any, Any]:
    return {key(i): value(i) for i in items if key(i) is not None}


def _sorted_set(values: Any) -> list[str] | None:
    return sorted({str(v) for v in values if v is not None}) if isinstance(values, list) else None


# (label, extractor) -> a scalar, or a dict {item label: value} compared item by item.
VERSIONS: tuple[tuple[str, Callable[[Facts], Any]], ...] = (
    ("driver", lambda f: _get(f, "gpu", "driver_version") or _get(f, "driver", "version")),
    ("kernel module", lambda f: _get(f, "driver", "kernel_module")),
    ("CUDA", lambda f: _get(f, "gpu", "cuda_version")),
    ("Fabric Manager", lambda f: _get(f, "fm", "build", "version")),
    ("Fabric Manager branch", lambda f: _get(f, "fm", "build", "branch")),
    ("VBIOS", lambda f: _keyed(_items(f, "gpu", "gpus"), lambda g: f"GPU {g.get('index')}", lambda g: g.get("vbios"))),
    ("NVSwitch firmware", lambda f: _sorted_set(_get(f, "nvswitch", "firmware", "nvswitch_versions"))),
    ("HCA firmware", lambda f: _keyed(_items(f, "ib", "ibstat", "hcas"), lambda h: h.get("name"),
                                      lambda h: h.get("fw_version"))),
    ("HCA PSID", lambda f: _keyed(_items(f, "ib", "firmware", "devices"),
                                  lambda d: d.get("pci_device") or d.get("index"), lambda d: d.get("psid"))),
    ("OFED", lambda f: _get(f, "ofed", "version")),
)


def _versions(host: str, a: Facts, b: Facts) -> list[Change]:
    out: list[Change] = []
    for label, extract in VERSIONS:
        va, vb = extract(a), extract(b)
        if isinstance(va, dict) or isinstance(vb, dict):
            da, db = va if isinstance(va, dict) else {}, vb if isinstance(vb, dict) else {}
            for item in sorted(set(da) | set(db), key=str):
                if da.get(item) != db.get(item):
                    out.append(Change(host, "version", f"{label} {item}", da.get(item), db.get(item)))
        elif va != vb and not (va is None and vb is None):
            out.append(Change(host, "version", label, va, vb))
    return out


def _counter(host: str, what: str, before: Any, after: Any) -> Change | None:
    if not isinstance(before, int) or not isinstance(after, int) or before == after:
        return None
    if after < before:  # a reset (reboot, driver reload): everything now counted is new
        return Change(host, "counter", what, before, after, delta=after, reset=True) if after else None
    return Change(host, "counter", what, before, after, delta=after - before)


def _pairs(a: Facts, b: Facts, path: tuple[str, ...], fields: tuple[str, ...]
           ) -> Iterator[tuple[tuple[Any, ...], Mapping[str, Any], Mapping[str, Any]]]:
    """(key, item in a, item in b) for every item of the list at `path` present in both snapshots, matched
    on `fields` (a link by GPU and link number, a port by device and port)."""
    def key(item: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(item.get(f) for f in fields)

    before = _keyed(_items(a, *path), key, dict)
    for item in _items(b, *path):
        prev = before.get(key(item))
        if prev is not None:
            yield key(item), prev, item


def _counters(host: str, a: Facts, b: Facts) -> list[Change]:
    out: list[Change] = []
    for key, prev, link in _pairs(a, b, ("nvlink", "errors", "links"), ("gpu", "link")):
        for name in NVLINK_COUNTERS:
            c = _counter(host, f"NVLink GPU {key[0]} link {key[1]} {name}", prev.get(name), link.get(name))
            if c:
                out.append(c)
    for key, prev, port in _pairs(a, b, ("ib", "counters", "ports"), ("device", "port")):
        for group in ("counters", "hw_counters"):
            before, after = prev.get(group) or {}, port.get(group) or {}
            for name in sorted(set(before) & set(after)):
                if name in IB_TRAFFIC_COUNTERS:
                    continue
                c = _counter(host, f"IB {key[0]}/{key[1]} {name}", before[name], after[name])
                if c:
                    out.append(c)
    return out


def compare(a: Mapping[str, Facts], b: Mapping[str, Facts]) -> Drift:
    """What changed on every host present in both runs A (before) and B (after)."""
    both = sorted(set(a) & set(b))
    changes: list[Change] = []
    for host in both:
        changes += _versions(host, a[host], b[host])
        changes += _counters(host, a[host], b[host])
    return Drift(hosts_compared=tuple(both), only_in_a=tuple(sorted(set(a) - set(b))),
                 only_in_b=tuple(sorted(set(b) - set(a))), changes=tuple(changes))
