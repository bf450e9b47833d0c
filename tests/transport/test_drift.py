"""Drift between two runs: version changes item by item, error-counter growth, resets, traffic ignored (pure)."""

from __future__ import annotations

import copy

from fabricproof.judging.drift import compare

BEFORE = {
    "host": "h1",
    "gpu": {"driver_version": "535.161.08", "cuda_version": "12.2",
            "gpus": [{"index": 0, "vbios": "96.00.74.00.01"}, {"index": 1, "vbios": "96.00.74.00.01"}]},
    "driver": {"version": "535.161.08", "kernel_module": "proprietary"},
    "fm": {"build": {"version": "535.161.08", "branch": None, "changelist": None}},
    "nvswitch": {"firmware": {"nvswitch_versions": ["96.10.45.00.01"]}},
    "ib": {"ibstat": {"hcas": [{"name": "mlx5_0", "fw_version": "28.39.1002"}, {"name": "mlx5_1", "fw_version": "28.39.1002"}]},
           "firmware": {"devices": [{"index": 0, "pci_device": "0000:1a:00.0", "psid": "MT_0000000838"}]},
           "counters": {"ports": [{"device": "mlx5_0", "port": 1,
                                   "counters": {"symbol_error": 0, "link_downed": 1, "port_xmit_data": 100},
                                   "hw_counters": {"out_of_buffer": 5}}]}},
    "nvlink": {"errors": {"links": [{"gpu": 0, "link": 4, "replay": 0, "recovery": 1, "crc": 10},
                                    {"gpu": 1, "link": 0, "replay": 0, "recovery": 0, "crc": 0}]}},
    "ofed": {"version": "MLNX_OFED_LINUX-23.10-1.1.9.0"},
}


def after(**changes):
    doc = copy.deepcopy(BEFORE)
    for path, value in changes.items():
        node = doc
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        node[int(last) if last.isdigit() else last] = value
    return doc


def test_same_facts_no_drift():
    d = compare({"h1": BEFORE}, {"h1": copy.deepcopy(BEFORE)})
    assert d.changes == () and not d.any and d.hosts_compared == ("h1",)


def test_version_changes_are_listed_item_by_item():
    b = after(**{"gpu.driver_version": "550.54.15", "fm.build.version": "550.54.15", "gpu.gpus.1.vbios": "96.00.89.00.01",
                 "ib.ibstat.hcas.1.fw_version": "28.40.1000", "ofed.version": "MLNX_OFED_LINUX-24.01",
                 "nvswitch.firmware.nvswitch_versions": ["96.10.45.00.01", "96.10.55.00.01"]})
    d = compare({"h1": BEFORE}, {"h1": b})
    got = [(c.what, c.before, c.after) for c in d.changes]
    assert got == [  # in the fixed order of VERSIONS
        ("driver", "535.161.08", "550.54.15"),
        ("Fabric Manager", "535.161.08", "550.54.15"),
        ("VBIOS GPU 1", "96.00.74.00.01", "96.00.89.00.01"),
        ("NVSwitch firmware", ["96.10.45.00.01"], ["96.10.45.00.01", "96.10.55.00.01"]),
        ("HCA firmware mlx5_1", "28.39.1002", "28.40.1000"),
        ("OFED", "MLNX_OFED_LINUX-23.10-1.1.9.0", "MLNX_OFED_LINUX-24.01"),
    ]
    assert all(c.kind == "version" and c.host == "h1" for c in d.changes)


def test_error_counters_grow_traffic_does_not_count():
    b = after(**{"nvlink.errors.links.0.crc": 25, "nvlink.errors.links.0.recovery": 3,
                 "ib.counters.ports.0.counters.symbol_error": 7,
                 "ib.counters.ports.0.counters.port_xmit_data": 99999,
                 "ib.counters.ports.0.hw_counters.out_of_buffer": 6})
    d = compare({"h1": BEFORE}, {"h1": b})
    got = {(c.what, c.delta) for c in d.changes}
    assert got == {("NVLink GPU 0 link 4 crc", 15), ("NVLink GPU 0 link 4 recovery", 2),
                   ("IB mlx5_0/1 symbol_error", 7), ("IB mlx5_0/1 out_of_buffer", 1)}
    assert all(c.kind == "counter" and not c.reset for c in d.changes)


def test_a_counter_that_went_down_was_reset_and_counts_what_it_shows_now():
    b = after(**{"nvlink.errors.links.0.crc": 4, "ib.counters.ports.0.counters.link_downed": 0})
    d = compare({"h1": BEFORE}, {"h1": b})
    assert [(c.what, c.delta, c.reset) for c in d.changes] == [("NVLink GPU 0 link 4 crc", 4, True)]


def test_hosts_in_one_run_only_are_reported_not_compared():
    d = compare({"h1": BEFORE, "gone": BEFORE}, {"h1": BEFORE, "new": BEFORE})
    assert d.only_in_a == ("gone",) and d.only_in_b == ("new",) and d.hosts_compared == ("h1",) and d.any
    assert d.as_dict()["only_in_b"] == ["new"]


def test_missing_sections_are_not_drift():
    bare = {"host": "h1"}
    d = compare({"h1": bare}, {"h1": bare})
    assert d.changes == ()
    d = compare({"h1": bare}, {"h1": BEFORE})
    assert ("driver", None, "535.161.08") in [(c.what, c.before, c.after) for c in d.changes]
