"""Profiles: platform values agree with domain.md A and with each other; mixed labs group by profile."""

from __future__ import annotations

import re

import pytest
from fabricproof_lab.emu import model, profiles
from fabricproof_lab.emu.profiles import PROFILES

# domain.md A: links per GPU, GB/s, NV#, NVSwitches, GPUs, compute HCAs and their rate.
PLATFORM = {
    "dgx-a100": (12, 25.0, "NV12", 6, 8, 8, 200),
    "dgx-h100": (18, 26.562, "NV18", 4, 8, 8, 400),
    "hgx-h200": (18, 26.562, "NV18", 4, 8, 8, 400),
    "gb200-nvl72": (18, 53.125, "NV18", 0, 4, 4, 400),
}


@pytest.mark.parametrize("name", sorted(PLATFORM))
def test_platform_values_follow_the_domain_table(name: str) -> None:
    p = PROFILES[name]
    links, gbps, topo, switches, gpus, hcas, rate = PLATFORM[name]
    assert (p["nvlink"]["links_per_gpu"], p["nvlink"]["gbps"], p["nvlink"]["topo"]) == (links, gbps, topo)
    assert p["nvswitch"]["count"] == switches == len(p["nvswitch"]["buses"])
    assert p["gpu"]["count"] == gpus == len(p["gpu"]["buses"])
    assert p["hcas"]["compute"]["count"] == hcas and p["hcas"]["compute"]["rate"] == rate
    assert p["hcas"]["compute"]["link_layer"] == "InfiniBand"


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_versions_are_released_builds_and_fm_matches_the_driver(name: str) -> None:
    p = PROFILES[name]
    drv = p["driver"]["version"]
    assert drv in profiles.DRIVER_RELEASES[p["driver"]["branch"]]
    assert p["cuda_version"] == profiles.CUDA_BY_BRANCH[p["driver"]["branch"]]
    if p["fm"]["present"]:
        assert p["fm"]["version"] == drv
        assert p["fm"]["config"]["FABRIC_MODE"] == "0"
        assert p["fm"]["config"]["LOG_FILE_NAME"] == "/var/log/fabricmanager.log"
        assert p["fm"]["config"]["FM_STAY_RESIDENT_ON_FAILURES"] == "0"
        assert p["fm"]["config"]["ABORT_CUDA_JOBS_ON_FM_EXIT"] == "1"
    else:  # GB200 trays: no FM; IMEX instead, same build as the driver
        assert p["imex"]["present"] and p["imex"]["version"] == drv
    assert re.fullmatch(r"\d{2}\.\d{2}\.\d{4}", p["hcas"]["compute"]["fw"])
    assert "iommu=pt" in p["kernel_cmdline"]


def test_gb200_trays_of_a_rack_share_clique_and_cluster_uuid_and_racks_differ() -> None:
    a = model.new_node("gb200-nvl72", 1, 3, "gb200-0001", "127.10.0.2")
    b = model.new_node("gb200-nvl72", 2, 3, "gb200-0002", "127.10.0.3")
    c = model.new_node("gb200-nvl72", 19, 4, "gb200-0019", "127.10.0.20")
    fab = lambda n: {(g["fabric"]["clique_id"], g["fabric"]["cluster_uuid"]) for g in n["gpus"]}  # noqa: E731
    assert fab(a) == fab(b) and len(fab(a)) == 1
    assert fab(a) != fab(c)
    clique, cluster = next(iter(fab(a)))
    assert clique != 0 and cluster != "00000000-0000-0000-0000-000000000000"


def test_packages_pin_driver_and_fabric_manager_at_one_build() -> None:
    assert profiles.packages_for(PROFILES["dgx-h100"]) == {
        "nvidia-driver-535": "535.161.08-0ubuntu1",
        "libnvidia-nscq-535": "535.161.08-1",
        "nvidia-fabricmanager-535": "535.161.08-1",
        "cuda-drivers-fabricmanager-535": "535.161.08-1",
    }
    gb = profiles.packages_for(PROFILES["gb200-nvl72"])
    assert not any("fabricmanager" in name for name in gb) and "nvidia-imex-580" in gb


def test_mixed_lab_is_grouped_by_profile_and_sums_to_n() -> None:
    seq = profiles.profile_sequence("mixed", 100)
    assert len(seq) == 100 and set(seq) == set(PROFILES)
    # grouped: each profile appears as one contiguous run
    runs = [p for i, p in enumerate(seq) if i == 0 or seq[i - 1] != p]
    assert len(runs) == len(set(runs))
    assert profiles.profile_sequence("dgx-h100", 3) == ["dgx-h100"] * 3
    with pytest.raises(KeyError):
        profiles.profile_sequence("dgx-b300", 1)


def test_identifiers_are_stable_and_unique_per_host() -> None:
    a1 = model.new_node("dgx-h100", 1, None, "h100-0001", "127.10.0.2")
    a2 = model.new_node("dgx-h100", 1, None, "h100-0001", "127.10.0.2")
    b = model.new_node("dgx-h100", 2, None, "h100-0002", "127.10.0.3")
    assert a1 == a2
    uuids = [g["uuid"] for n in (a1, b) for g in n["gpus"]]
    guids = [h["node_guid"] for n in (a1, b) for h in n["hcas"]]
    assert len(set(uuids)) == len(uuids) and len(set(guids)) == len(guids)
    assert all(re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", u) for u in uuids)
