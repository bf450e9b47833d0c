"""nvidia-smi -q / -q -x / --query-gpu and /proc/driver/nvidia/version parsers against the real-output corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fabricproof import tools
from fabricproof.collectors.gpu import driver_version, nvidia_smi_q, nvidia_smi_q_xml, nvidia_smi_query_gpu
from fabricproof.collectors.base import Collector, ParseError, read_host_file
from fabricproof.collectors.gpu.fragment import GPU_SCHEMA
from fabricproof.collectors.textutil import indent_tree

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

# Same location as the `corpus` fixture (tests/conftest.py); only used to list files at collection time.
_CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
GPU_COLLECTORS = (
    *nvidia_smi_q.COLLECTORS,
    *nvidia_smi_q_xml.COLLECTORS,
    *nvidia_smi_query_gpu.COLLECTORS,
    *driver_version.COLLECTORS,
)
COLLECTORS = {c.id: c for c in GPU_COLLECTORS}


def _names(family: str, pattern: str = "*") -> list[str]:
    folder = _CORPUS / family
    return sorted(p.name for p in folder.glob(pattern)) if folder.is_dir() else []


def _read(corpus: Path, family: str, name: str) -> str:
    return (corpus / family / name).read_text(encoding="utf-8")


def _gpu_fragment(text_parser, corpus: Path, family: str, name: str) -> dict[str, Any]:
    fragment = text_parser(_read(corpus, family, name))
    assert_valid(GPU_SCHEMA, fragment)
    return fragment


# --- every corpus file parses and matches the fragment schema ------------------------------------


@pytest.mark.parametrize("name", _names("nvidia-smi-q"))
def test_every_q_text_file_parses(corpus: Path, name: str) -> None:
    fragment = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)
    assert fragment["count"] == len(fragment["gpus"]) >= 1
    assert [g["index"] for g in fragment["gpus"]] == list(range(fragment["count"]))


@pytest.mark.parametrize("name", _names("nvidia-smi-q-xml"))
def test_every_q_xml_file_parses(corpus: Path, name: str) -> None:
    fragment = _gpu_fragment(nvidia_smi_q_xml.parse_q_xml, corpus, "nvidia-smi-q-xml", name)
    assert fragment["count"] >= 1
    assert all(g["name"] and g["uuid"] and g["bus_id"] for g in fragment["gpus"])


@pytest.mark.parametrize("name", _names("misc", "query-gpu-csv-*"))
def test_every_query_gpu_csv_file_parses(corpus: Path, name: str) -> None:
    fragment = _gpu_fragment(nvidia_smi_query_gpu.parse_query_gpu_csv, corpus, "misc", name)
    assert fragment["count"] >= 1
    assert all(g["name"] and g["bus_id"] for g in fragment["gpus"])


@pytest.mark.parametrize("name", _names("misc", "proc-driver-nvidia-version-*"))
def test_every_proc_driver_version_file_parses(corpus: Path, name: str) -> None:
    fragment = driver_version.parse_driver_version(_read(corpus, "misc", name))
    assert_valid(driver_version.DRIVER_SCHEMA, fragment)
    # The file names carry the flavour and version the file itself shows.
    assert fragment["kernel_module"] in name
    assert fragment["version"] in name


# --- anchors from the corpus README and the files themselves -------------------------------------


def test_h100_535_161_08_q_eight_gpus_fabric_completed(corpus: Path) -> None:
    name = "h100-80gb-hbm3-8gpu-driver535.161.08-fabric-completed.txt"
    fragment = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)
    assert fragment["count"] == fragment["attached_gpus"] == 8
    assert fragment["driver_version"] == "535.161.08"
    assert fragment["cuda_version"] == "12.2"
    assert {(g["fabric"]["state"], g["fabric"]["status"]) for g in fragment["gpus"]} == {("Completed", "Success")}
    # 535 prints State/Status only: no clique, cluster or health lines.
    assert all(g["fabric"]["clique_id"] is None and g["fabric"]["cluster_uuid"] is None for g in fragment["gpus"])
    gpu0 = fragment["gpus"][0]
    assert gpu0["bus_id"] == "00000000:19:00.0"
    assert gpu0["uuid"] == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"  # same host as the fabricmanager log
    assert gpu0["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu0["vbios"] == "96.00.74.00.0D"
    assert (gpu0["persistence_mode"], gpu0["ecc_mode"]) == ("Enabled", "Enabled")
    assert gpu0["power_limit_w"] == 700.0
    assert (gpu0["pcie_gen"], gpu0["pcie_width"]) == (5, 16)
    assert gpu0["remapped_rows"] == {"pending": False, "failure": False, "uncorrectable": 0, "correctable": 0}
    # "HW Slowdown: Active" with the nested "HW Power Brake Slowdown: Active" under it.
    assert gpu0["throttle_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]


def test_q_sections_printed_alike_are_read_once(corpus: Path) -> None:
    # The GPUs of a node print most sections alike: each distinct text is parsed once, and the facts stay each GPU's.
    name = "h100-80gb-hbm3-8gpu-driver535.161.08-fabric-completed.txt"
    text = (corpus / "nvidia-smi-q" / name).read_text()
    nvidia_smi_q._section.cache_clear()
    fragment = nvidia_smi_q.parse_q(text)
    read = nvidia_smi_q._section.cache_info()
    assert read.hits >= 7 * 4 and read.misses < 8 * 4  # throttle reasons, remapped rows, ECC, fabric: alike here
    assert [g["bus_id"] for g in fragment["gpus"]][:2] == ["00000000:19:00.0", "00000000:3B:00.0"]
    assert nvidia_smi_q.parse_q(text) == fragment


def test_clocks_throttle_reasons_block_reads_like_clocks_event_reasons(corpus: Path) -> None:
    # Drivers before 535 title the same block "Clocks Throttle Reasons".
    text = _read(corpus, "nvidia-smi-q", "h100-80gb-hbm3-8gpu-driver535.161.08-fabric-completed.txt")
    old = nvidia_smi_q.parse_q(text.replace("Clocks Event Reasons", "Clocks Throttle Reasons"))
    new = nvidia_smi_q.parse_q(text)
    assert [g["throttle_reasons"] for g in old["gpus"]] == [g["throttle_reasons"] for g in new["gpus"]]
    assert old["gpus"][0]["throttle_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]


def test_590_q_fabric_health_block(corpus: Path) -> None:
    name = "q-h100-80gb-hbm3-1gpu-vm-590.48.01-idle-fabric-health-block.txt"
    gpu = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)["gpus"][0]
    assert gpu["fabric"]["state"] == "Completed"
    assert gpu["fabric"]["clique_id"] == 0
    assert gpu["fabric"]["cluster_uuid"] == ZERO_UUID
    assert set(gpu["fabric"]["health"]) >= {"summary", "bandwidth", "route_unhealthy", "incorrect_configuration"}
    assert all(v is None for v in gpu["fabric"]["health"].values())  # all N/A on this VM
    assert gpu["throttle_reasons"] == ["gpu_idle"]


def test_560_q_fabric_block_all_na(corpus: Path) -> None:
    name = "titan-v-1gpu-driver560.35.03-fabric-cliqueid-na.txt"
    gpu = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)["gpus"][0]
    assert gpu["fabric"]["state"] is gpu["fabric"]["clique_id"] is gpu["fabric"]["health"]["bandwidth"] is None
    assert gpu["remapped_rows"] is None  # "Remapped Rows : N/A" on Volta
    assert gpu["ecc_mode"] is None


def test_q_mig_mode_counts_mig_devices(corpus: Path) -> None:
    name = "q-h200-mig-1gpu-vm-590.48.01-idle-fabric-health-block.txt"
    gpu = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)["gpus"][0]
    assert (gpu["mig_mode"], gpu["mig_devices"]) == ("Enabled", 5)


def test_azure_gb_fabric_excerpt_is_one_unhealthy_gpu(corpus: Path) -> None:
    name = "fabric-excerpt-azure-gb-node-insufficient-resources.txt"
    fragment = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)
    assert fragment["count"] == 1
    assert fragment["driver_version"] is None
    assert any("no 'GPU <bus id>' header" in n for n in fragment["notes"])
    gpu = fragment["gpus"][0]
    assert gpu["index"] == 0 and gpu["name"] is None
    assert gpu["fabric"]["state"] == "Completed"
    assert gpu["fabric"]["status"] == "Insufficient Resources"
    assert gpu["fabric"]["clique_id"] == 0
    assert gpu["fabric"]["cluster_uuid"] == ZERO_UUID


def test_q_d_page_retirement_keeps_gpus_without_names(corpus: Path) -> None:
    name = "q-d-page_retirement-8gpu-azure-driver535.86.10.txt"
    fragment = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)
    assert fragment["count"] == 8 and fragment["driver_version"] == "535.86.10"
    assert [g["bus_id"] for g in fragment["gpus"]][:2] == ["00000001:00:00.0", "00000002:00:00.0"]
    assert all(g["name"] is None and g["mig_devices"] is None for g in fragment["gpus"])
    assert any("partial output" in n for n in fragment["notes"])


def test_rtx4090_q_has_no_fabric(corpus: Path) -> None:
    fragment = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", "rtx4090-8gpu-driver535.154.05-fabric-na.txt")
    assert fragment["count"] == 8
    assert all(g["fabric"]["state"] is None and g["fabric"]["status"] is None for g in fragment["gpus"])


def test_gb200_xml_clique_2_healthy_full(corpus: Path) -> None:
    name = "k8s-test-infra-real-gb200-driver580.173.02-scrubbed-ids.xml"
    fragment = _gpu_fragment(nvidia_smi_q_xml.parse_q_xml, corpus, "nvidia-smi-q-xml", name)
    assert fragment["count"] == 4
    assert fragment["driver_version"] == "580.173.02" and fragment["cuda_version"] == "13.0"
    for gpu in fragment["gpus"]:
        assert (gpu["fabric"]["state"], gpu["fabric"]["status"]) == ("Completed", "Success")
        assert gpu["fabric"]["clique_id"] == 2
        assert gpu["fabric"]["cluster_uuid"] != ZERO_UUID
        assert (gpu["fabric"]["health"]["summary"], gpu["fabric"]["health"]["bandwidth"]) == ("Healthy", "Full")
        assert gpu["fabric"]["health"]["route_unhealthy"] == "False"
    assert fragment["gpus"][0]["power_limit_w"] == 1200.0


def test_gb300_xml_clique_32766_keeps_none_state(corpus: Path) -> None:
    name = "k8s-test-infra-real-gb300-driver580.173.02-scrubbed-ids.xml"
    fragment = _gpu_fragment(nvidia_smi_q_xml.parse_q_xml, corpus, "nvidia-smi-q-xml", name)
    assert {g["fabric"]["clique_id"] for g in fragment["gpus"]} == {32766}
    # "None" is a state (no misconfiguration), not a missing value.
    assert {g["fabric"]["health"]["incorrect_configuration"] for g in fragment["gpus"]} == {"None"}


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("k8s-test-infra-real-h100-driver580.105.08-scrubbed-ids.xml", 8),
        ("k8s-test-infra-real-b200-driver580.105.08-scrubbed-ids.xml", 8),
    ],
)
def test_single_node_nvswitch_xml_clique_0_zero_cluster(corpus: Path, name: str, count: int) -> None:
    fragment = _gpu_fragment(nvidia_smi_q_xml.parse_q_xml, corpus, "nvidia-smi-q-xml", name)
    assert fragment["count"] == count
    for gpu in fragment["gpus"]:
        assert (gpu["fabric"]["state"], gpu["fabric"]["status"]) == ("Completed", "Success")
        assert gpu["fabric"]["clique_id"] == 0
        assert gpu["fabric"]["cluster_uuid"] == ZERO_UUID


def test_trimmed_a100_xml_notes_attached_count_mismatch(corpus: Path) -> None:
    name = "a100-sxm4-80gb-4gpu-mig-driver535-v12.xml"
    fragment = _gpu_fragment(nvidia_smi_q_xml.parse_q_xml, corpus, "nvidia-smi-q-xml", name)
    assert (fragment["count"], fragment["attached_gpus"]) == (1, 4)
    assert any("4 attached GPUs but lists 1" in n for n in fragment["notes"])
    gpu = fragment["gpus"][0]
    assert (gpu["mig_mode"], gpu["mig_devices"]) == ("Enabled", 4)
    assert gpu["remapped_rows"] is None  # "<remapped_rows>N/A</remapped_rows>"
    assert gpu["fabric"]["state"] is None


def test_xml_and_text_give_the_same_shape(corpus: Path) -> None:
    q_name = "q-h100-80gb-hbm3-1gpu-vm-590.48.01-idle-fabric-health-block.txt"
    xml_name = "k8s-test-infra-real-h100-driver580.105.08-scrubbed-ids.xml"
    text = nvidia_smi_q.parse_q(_read(corpus, "nvidia-smi-q", q_name))
    xml = nvidia_smi_q_xml.parse_q_xml(_read(corpus, "nvidia-smi-q-xml", xml_name))
    assert set(text) == set(xml)
    assert set(text["gpus"][0]) == set(xml["gpus"][0])
    assert text["gpus"][0]["fabric"].keys() == xml["gpus"][0]["fabric"].keys()


def test_query_gpu_csv_all_fields_h100(corpus: Path) -> None:
    name = "query-gpu-csv-allfields-incl-fabric-h100-80gb-hbm3-1gpu-vm-590.48.01-idle.txt"
    fragment = _gpu_fragment(nvidia_smi_query_gpu.parse_query_gpu_csv, corpus, "misc", name)
    assert (fragment["count"], fragment["attached_gpus"]) == (1, 1)
    assert fragment["driver_version"] == "590.48.01" and fragment["cuda_version"] is None
    gpu = fragment["gpus"][0]
    assert gpu["bus_id"] == "00000000:00:09.0" and gpu["vbios"] == "96.00.A5.00.01"
    assert gpu["power_limit_w"] == 700.0  # header "power.limit [W]", cell "700.00 W"
    assert gpu["throttle_reasons"] == ["gpu_idle"]  # clocks_event_reasons.active 0x...01
    assert (gpu["pcie_gen"], gpu["pcie_width"]) == (5, 16)
    assert gpu["remapped_rows"] == {"pending": False, "failure": False, "uncorrectable": 0, "correctable": 0}
    assert gpu["fabric"]["state"] == "Completed" and gpu["fabric"]["clique_id"] == 0
    assert gpu["fabric"]["cluster_uuid"] == ZERO_UUID
    assert gpu["fabric"]["health"]["summary"] is None  # "N/A"


def test_query_gpu_csv_excerpt_with_elided_rows(corpus: Path) -> None:
    name = "query-gpu-csv-name-busid-vbios-h100-excerpt-mlengineering.txt"
    fragment = _gpu_fragment(nvidia_smi_query_gpu.parse_query_gpu_csv, corpus, "misc", name)
    assert [g["bus_id"] for g in fragment["gpus"]] == ["00000000:04:00.0", "00000000:8B:00.0"]
    assert {g["vbios"] for g in fragment["gpus"]} == {"96.00.89.00.01"}
    assert any("elided" in n for n in fragment["notes"])


def test_query_gpu_csv_in_the_collector_field_order() -> None:
    # Header as nvidia-smi prints it for the collector's --query-gpu list; cells in the spellings
    # the corpus shows ([Not Supported], [N/A], units after numbers).
    header = ", ".join(f + (" [W]" if f == "power.limit" else "") for f in tools.QUERY_GPU_FIELDS)
    rows = [
        "0, 00000000:19:00.0, NVIDIA H100 80GB HBM3, GPU-1, 535.161.08, 96.00.74.00.0D, Enabled, Enabled, "
        "700.00 W, 0x0000000000000048, 5, 16, Completed, Success",
        "1, 00000000:3B:00.0, NVIDIA H100 80GB HBM3, GPU-2, 535.161.08, 96.00.74.00.0D, Disabled, [N/A], "
        "[Not Supported], [Not Supported], 4, 8, In Progress, [N/A]",
    ]
    fragment = nvidia_smi_query_gpu.parse_query_gpu_csv("\n".join([header, *rows]) + "\n")
    assert_valid(GPU_SCHEMA, fragment)
    first, second = fragment["gpus"]
    assert first["throttle_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]  # 0x8 | 0x40
    assert first["power_limit_w"] == 700.0
    assert (first["fabric"]["state"], first["fabric"]["status"]) == ("Completed", "Success")
    assert second["index"] == 1 and second["persistence_mode"] == "Disabled" and second["ecc_mode"] is None
    assert second["power_limit_w"] is None and second["throttle_reasons"] == []
    assert (second["pcie_gen"], second["pcie_width"]) == (4, 8)
    assert (second["fabric"]["state"], second["fabric"]["status"]) == ("In Progress", None)


@pytest.mark.parametrize(
    ("mask", "reasons"),
    [
        ("0x0000000000000000", []),
        ("0x0000000000000001", ["gpu_idle"]),
        ("0x00000000000000A4", ["sw_power_cap", "sw_thermal_slowdown", "hw_power_brake_slowdown"]),
        ("0x0000000000000112", ["applications_clocks_setting", "sync_boost", "display_clocks_setting"]),
    ],
)
def test_throttle_mask_bits(mask: str, reasons: list[str]) -> None:
    fragment = nvidia_smi_query_gpu.parse_query_gpu_csv(f"index, clocks_throttle_reasons.active\n0, {mask}\n")
    assert fragment["gpus"][0]["throttle_reasons"] == reasons


def test_proc_driver_version_open_and_proprietary(corpus: Path) -> None:
    name = "proc-driver-nvidia-version-open-570.195.03-ubuntu22.txt"
    open_570 = driver_version.parse_driver_version(_read(corpus, "misc", name))
    assert open_570["version"] == "570.195.03" and open_570["kernel_module"] == "open"
    assert open_570["arch"] == "x86_64" and open_570["gcc_version"] == "12.3.0"
    assert open_570["build"].startswith("Release Build")
    closed = driver_version.parse_driver_version(
        _read(corpus, "misc", "proc-driver-nvidia-version-proprietary-440.95.01-ubuntu18.txt")
    )
    assert (closed["version"], closed["kernel_module"]) == ("440.95.01", "proprietary")
    assert closed["build"] == "Thu May 28 07:03:08 UTC 2020"
    assert closed["gcc_version"] == "7.5.0"


# --- ECC counters, retired pages, remapped rows, recovery action (issue 10.1, 10.5) ------------------------------


@pytest.mark.parametrize("name", _names("nvidia-smi-q"))
def test_every_q_text_file_reports_the_memory_health_it_prints(corpus: Path, name: str) -> None:
    """A file that prints ECC Errors / Retired Pages / Remapped Rows blocks yields them as facts; none is dropped."""
    text = _read(corpus, "nvidia-smi-q", name)
    fragment = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)
    for gpu in fragment["gpus"]:
        if "    ECC Errors" in text:
            assert gpu["ecc_errors"] is not None
            assert set(gpu["ecc_errors"]["volatile"]) >= {"sram_correctable", "dram_uncorrectable", "uncorrectable"}
        if "Remapped Rows\n" in text.replace("\r", ""):
            assert gpu["remapped_rows"] is None or gpu["remapped_rows"]["correctable"] is not None
    if "GPU Recovery Action" in text:
        assert {g["recovery_action"] for g in fragment["gpus"]} == {"None"}


def test_a40_aggregate_dram_correctable_and_correctable_remapped_rows(corpus: Path) -> None:
    # The values the file shows: three A40s with corrected DRAM errors over their lifetime, each with remapped rows
    # for correctable errors (dropped before issue 10), none pending, no uncorrectable error.
    name = "a40-10gpu-driver550.127.05-aggregate-dram-correctable-nonzero-remapped-rows-thamada.txt"
    gpus = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)["gpus"]
    dram = {g["index"]: g["ecc_errors"]["aggregate"]["dram_correctable"] for g in gpus}
    assert {i: n for i, n in dram.items() if n} == {0: 10, 6: 10289, 9: 198}
    assert {g["index"]: g["remapped_rows"]["correctable"] for g in gpus if g["remapped_rows"]["correctable"]} == {
        0: 2, 6: 1, 9: 1}
    for gpu in gpus:
        ecc = gpu["ecc_errors"]
        assert ecc["volatile"]["uncorrectable"] == ecc["aggregate"]["uncorrectable"] == 0
        assert ecc["volatile"]["correctable"] == 0
        assert ecc["aggregate"]["correctable"] == dram[gpu["index"]]  # SRAM corrected 0 on every A40
        assert ecc["sram_threshold_exceeded"] is False
        assert gpu["remapped_rows"]["pending"] is False and gpu["remapped_rows"]["failure"] is False
        # Ampere prints Retired Pages as N/A: it remaps rows instead
        assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}


def test_590_layout_repair_flags_and_recovery_action(corpus: Path) -> None:
    gpu = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q",
                        "q-h100-80gb-hbm3-1gpu-vm-590.48.01-idle-fabric-health-block.txt")["gpus"][0]
    ecc = gpu["ecc_errors"]
    assert (ecc["channel_repair_pending"], ecc["tpc_repair_pending"], ecc["unrepairable_memory"]) == (False, False, False)
    assert ecc["volatile"]["sram_uncorrectable_parity"] == ecc["volatile"]["sram_uncorrectable_secded"] == 0
    assert gpu["recovery_action"] == "None"  # "GPU Recovery Action : None" (R570 and later)


def test_geforce_and_volta_ecc_counters_are_unknown_not_zero(corpus: Path) -> None:
    # RTX 4090 (R535 consumer layout: SRAM Correctable/Uncorrectable) and TITAN V (Single Bit / Double Bit) print N/A.
    for name in ("rtx4090-8gpu-driver535.154.05-fabric-na.txt", "titan-v-1gpu-driver560.35.03-fabric-cliqueid-na.txt"):
        for gpu in _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", name)["gpus"]:
            for scope in ("volatile", "aggregate"):
                assert set(gpu["ecc_errors"][scope].values()) == {None}, name
            assert gpu["recovery_action"] is None  # not printed before R570


def test_volta_single_and_double_bit_totals_are_the_scope_totals() -> None:
    text = _VOLTA_ECC.replace("{sbe}", "7").replace("{dbe}", "1")
    gpu = nvidia_smi_q.parse_q(text)["gpus"][0]
    assert gpu["ecc_errors"]["volatile"] | {} == {
        "sram_correctable": None, "sram_uncorrectable": None, "sram_uncorrectable_parity": None,
        "sram_uncorrectable_secded": None, "dram_correctable": None, "dram_uncorrectable": None,
        "single_bit": 7, "double_bit": 1, "correctable": 7, "uncorrectable": 1}


# The Volta layout of the TITAN V file, with numbers where that board prints N/A.
_VOLTA_ECC = """GPU 00000000:3B:00.0
    Product Name                          : Tesla V100-SXM2-32GB
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : {sbe}
                Register File             : 0
                Total                     : {sbe}
            Double Bit
                Device Memory             : {dbe}
                Register File             : 0
                Total                     : {dbe}
    Retired Pages
        Single Bit ECC                    : 2
        Double Bit ECC                    : 1
        Pending Page Blacklist            : Yes
"""


def test_page_retirement_section_output_gives_retired_pages_with_a_note(corpus: Path) -> None:
    # `nvidia-smi -q -d PAGE_RETIREMENT` (real, 8 Azure GPUs): the section's facts, the rest unknown, and a note
    # naming the sections the output shows.
    fragment = _gpu_fragment(nvidia_smi_q.parse_q, corpus, "nvidia-smi-q", "q-d-page_retirement-8gpu-azure-driver535.86.10.txt")
    assert {json_key(g["retired_pages"]) for g in fragment["gpus"]} == {(0, 0, False)}
    assert all(g["ecc_errors"] is None and g["remapped_rows"] is None for g in fragment["gpus"])
    assert any("sections shown: Retired Pages" in n for n in fragment["notes"])
    volta = nvidia_smi_q.parse_q(_VOLTA_ECC.replace("{sbe}", "0").replace("{dbe}", "0"))["gpus"][0]
    assert volta["retired_pages"] == {"single_bit": 2, "double_bit": 1, "pending": True}


def json_key(retired: dict[str, Any]) -> tuple[Any, ...]:
    return retired["single_bit"], retired["double_bit"], retired["pending"]


def _section_output(text: str, titles: tuple[str, ...]) -> str:
    """What `nvidia-smi -q -d <SECTION>` prints for a full -q: the header lines, then per GPU its header line and
    only the named top-level sections (the layout of the real -q -d PAGE_RETIREMENT sample)."""
    out, keep = [], True
    for line in text.splitlines():
        if line.startswith("GPU "):
            out.append(line)
            keep = False
        elif line.startswith("    ") and not line.startswith("     "):
            keep = line.strip().split(":")[0].strip() in titles
            if keep:
                out.append(line)
        elif not line.startswith(" "):
            out.append(line)
            keep = False
        elif keep:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(("section", "titles"), [("ECC", ("ECC Mode", "ECC Errors")), ("ROW_REMAPPER", ("Remapped Rows",))])
def test_q_d_section_outputs_parse_with_a_note(corpus: Path, section: str, titles: tuple[str, ...]) -> None:
    # -q -d ECC / -q -d ROW_REMAPPER cut from the real A40 -q (no such capture is in the corpus yet)
    full = _read(corpus, "nvidia-smi-q", "a40-10gpu-driver550.127.05-aggregate-dram-correctable-nonzero-remapped-rows-thamada.txt")
    whole = nvidia_smi_q.parse_q(full)
    part = nvidia_smi_q.parse_q(_section_output(full, titles))
    assert_valid(GPU_SCHEMA, part)
    assert part["count"] == 10 and all(g["name"] is None for g in part["gpus"])
    assert any(f"sections shown: {', '.join(titles)}" in n for n in part["notes"])
    for got, want in zip(part["gpus"], whole["gpus"], strict=True):
        if section == "ECC":
            assert (got["ecc_errors"], got["ecc_mode"]) == (want["ecc_errors"], want["ecc_mode"])
            assert got["remapped_rows"] is None
        else:
            assert got["remapped_rows"] == want["remapped_rows"] and got["ecc_errors"] is None


def test_xml_memory_health_and_recovery_action(corpus: Path) -> None:
    gb200 = _gpu_fragment(nvidia_smi_q_xml.parse_q_xml, corpus, "nvidia-smi-q-xml",
                          "k8s-test-infra-real-gb200-driver580.173.02-scrubbed-ids.xml")["gpus"]
    for gpu in gb200:
        assert gpu["recovery_action"] == "None"
        assert gpu["ecc_errors"]["unrepairable_memory"] is False and gpu["ecc_errors"]["volatile"]["uncorrectable"] == 0
        assert gpu["remapped_rows"] == {"pending": False, "failure": False, "uncorrectable": 0, "correctable": 0}
        assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    old = _gpu_fragment(nvidia_smi_q_xml.parse_q_xml, corpus, "nvidia-smi-q-xml", "a100-sxm4-80gb-4gpu-mig-driver535-v12.xml")
    ecc = old["gpus"][0]["ecc_errors"]
    # DTD v12 of R535 prints one <sram_uncorrectable> (no parity/SEC-DED split)
    assert ecc["volatile"]["sram_uncorrectable"] == 0 and ecc["volatile"]["sram_uncorrectable_parity"] is None
    assert old["gpus"][0]["recovery_action"] is None


def test_text_xml_and_csv_agree_on_memory_health(corpus: Path) -> None:
    text = nvidia_smi_q.parse_q(_read(corpus, "nvidia-smi-q", "q-h100-80gb-hbm3-1gpu-vm-590.48.01-idle-fabric-health-block.txt"))
    csv = nvidia_smi_query_gpu.parse_query_gpu_csv(
        _read(corpus, "misc", "query-gpu-csv-allfields-incl-fabric-h100-80gb-hbm3-1gpu-vm-590.48.01-idle.txt"))
    a, b = text["gpus"][0], csv["gpus"][0]  # the same VM, captured once with -q and once with --query-gpu
    for scope in ("volatile", "aggregate"):
        assert a["ecc_errors"][scope] == b["ecc_errors"][scope]
    assert a["remapped_rows"] == b["remapped_rows"] and a["recovery_action"] == b["recovery_action"] == "None"
    assert b["ecc_errors"]["sram_threshold_exceeded"] is False


# --- nvidia-smi -q bodies: read lazily, exactly like the full indentation tree --------------------

_REGULAR_BODY = (
    "    Product Name                          : NVIDIA H100 80GB HBM3\n"
    "    MIG Mode\n"
    "        Current                           : Disabled\n"
    "    \n"  # blank, but with the top-level indent: the next line still belongs to MIG Mode
    "        Pending                           : Disabled\n"
    "    PCI\n"
    "        Bus Id                            : 00000000:19:00.0\n"
    "        GPU Link Info\n"
    "            PCIe Generation\n"
    "                Current                   : 5\n"
    "    pci\n"  # the same title again, other case: lookups take the first
    "        Bus Id                            : 00000000:FF:00.0\n"
    "    MIG Device\n"
    "    Mig Device\n"
    "    Fabric\n"
    "\tState                                   : Completed\n"  # a TAB is 8 columns: a child of Fabric
    "        Health\n"
    "            Summary                       : Healthy\n"
    "    : no title\n"
)
_BODIES = {
    "regular": _REGULAR_BODY,
    "outdented-line": _REGULAR_BODY + "  Odd : two spaces, less than the first line\n    Last : 1\n",
    "first-line-deepest": "        Deep : 8\n" + _REGULAR_BODY,
    "flush-left": "Product Name : X\nPCI\n  Bus Id : 00000000:01:00.0\nFabric\n  State : Completed\n",
    "empty": "",
}
_PATHS = [
    ("Product Name",),
    ("MIG Mode",),
    ("MIG Mode", "Current"),
    ("MIG Mode", "Pending"),
    ("PCI", "Bus Id"),
    ("PCI", "GPU Link Info", "PCIe Generation", "Current"),
    ("pci",),
    ("Fabric", "State"),
    ("Fabric", "Health", "Summary"),
    ("Odd",),
    ("Deep",),
    ("",),
    ("Missing", "Current"),
]


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_q_body_lookups_match_the_full_tree(name: str) -> None:
    _, [(bus_id, body)] = nvidia_smi_q._q_sections("GPU 00000000:19:00.0\n" + _BODIES[name])
    assert bus_id == "00000000:19:00.0"
    full = indent_tree(body)
    lazy = nvidia_smi_q._Body.of_text(body)
    # the lazy reading applies when no line is indented less than the first; else the whole tree is built
    assert bool(lazy.pending) == (name in ("regular", "flush-left"))
    assert lazy.titles == [c.key.lower() for c in full.children]
    for path in _PATHS:
        assert lazy.find(*path) == nvidia_smi_q._find(full, *path), path


def test_q_first_section_with_a_title_wins() -> None:
    text = (
        "GPU 00000000:19:00.0\n"
        "    Product Name : NVIDIA H100 80GB HBM3\n"
        "    ECC Mode\n"
        "        Pending : Enabled\n"
        "    Ecc Mode\n"
        "        Current : Enabled\n"
        "    Persistence Mode : Enabled\n"
        "    MIG Mode\n"
        "        Current : Enabled\n"
        "    MIG Device\n"
        "        Instance : 1\n"
        "    mig device\n"
    )
    gpu = nvidia_smi_q.parse_q(text)["gpus"][0]
    assert gpu["ecc_mode"] is None  # the first ECC Mode block has no Current line
    assert (gpu["persistence_mode"], gpu["mig_mode"], gpu["mig_devices"]) == ("Enabled", "Enabled", 2)


def test_q_line_breaks_and_tabs_do_not_change_the_result() -> None:
    spaces = (
        "Driver Version : 535.161.08\n"
        "GPU 00000000:19:00.0\n"
        "    Product Name : NVIDIA H100 80GB HBM3\n"
        "    PCI\n"
        "        GPU Link Info\n"
        "            PCIe Generation\n"
        "                Current : 5\n"
        "GPU 00000000:3B:00.0  \n"
        "    Product Name : NVIDIA H100 80GB HBM3\n"
    )
    expected = nvidia_smi_q.parse_q(spaces)
    assert [g["bus_id"] for g in expected["gpus"]] == ["00000000:19:00.0", "00000000:3B:00.0"]
    assert expected["gpus"][0]["pcie_gen"] == 5
    assert nvidia_smi_q.parse_q(spaces.replace("\n", "\r\n")) == expected
    assert nvidia_smi_q.parse_q(spaces.replace("\n", "\x0b")) == expected  # splitlines() breaks at \v too
    assert nvidia_smi_q.parse_q(spaces.replace("    ", "\t")) == expected
    assert nvidia_smi_q.parse_q(spaces.split("\n", 1)[1])["gpus"] == expected["gpus"]  # header on the first line


# --- unreadable output raises ParseError ---------------------------------------------------------

GARBAGE = [
    "bash: nvidia-smi: command not found\n",
    "",
    "\x8f\x02\xffrandom\x00bytes\x1b[0m\n\x07",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
]


@pytest.mark.parametrize(
    "parse",
    [nvidia_smi_q.parse_q, nvidia_smi_q_xml.parse_q_xml, nvidia_smi_query_gpu.parse_query_gpu_csv, driver_version.parse_driver_version],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("text", GARBAGE, ids=["not-found", "empty", "bytes", "smi-failed"])
def test_garbage_raises_parse_error(parse, text: str) -> None:
    with pytest.raises(ParseError):
        parse(text)


def test_xml_entity_expansion_is_refused() -> None:
    bomb = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>'
    with pytest.raises(ParseError):
        nvidia_smi_q_xml.parse_q_xml(bomb)


def test_xml_with_other_root_is_refused() -> None:
    with pytest.raises(ParseError, match="root"):
        nvidia_smi_q_xml.parse_q_xml("<html><body/></html>")


# --- collector table --------------------------------------------------------------------------


def test_collector_table_matches_contract() -> None:
    fields = (
        "index,pci.bus_id,name,uuid,driver_version,vbios_version,persistence_mode,ecc.mode.current,power.limit,"
        "clocks_throttle_reasons.active,pcie.link.gen.current,pcie.link.width.current,fabric.state,fabric.status"
    )
    query_gpu = ("nvidia-smi", f"--query-gpu={fields}", "--format=csv")
    assert_collector_table(
        GPU_COLLECTORS,
        {
            "nvidia_smi_q": (("nvidia-smi", "-q"), "/gpu", True),
            "nvidia_smi_q_xml": (("nvidia-smi", "-q", "-x"), "/gpu", False),
            "nvidia_smi_query_gpu": (query_gpu, "/gpu", False),
            "driver_version": (read_host_file("/proc/driver/nvidia/version"), "/driver", True),
        },
    )
    # The three /gpu front-ends are interchangeable: one fragment schema.
    schemas = {id(COLLECTORS[cid].schema) for cid in ("nvidia_smi_q", "nvidia_smi_q_xml", "nvidia_smi_query_gpu")}
    assert len(schemas) == 1


@pytest.mark.parametrize("collector", GPU_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


@pytest.mark.parametrize(("family", "parse", "name", "device_id"), [
    ("nvidia-smi-q", nvidia_smi_q.parse_q, "h100-80gb-hbm3-8gpu-driver535.161.08-fabric-completed.txt", "2330"),
    ("nvidia-smi-q", nvidia_smi_q.parse_q, "rtx4090-8gpu-driver535.154.05-fabric-na.txt", "2684"),
    ("nvidia-smi-q-xml", nvidia_smi_q_xml.parse_q_xml, "k8s-test-infra-real-gb200-driver580.173.02-scrubbed-ids.xml",
     "2941"),
    ("nvidia-smi-q-xml", nvidia_smi_q_xml.parse_q_xml, "k8s-test-infra-real-gb300-driver580.173.02-scrubbed-ids.xml",
     "31c2"),
    ("nvidia-smi-q-xml", nvidia_smi_q_xml.parse_q_xml, "k8s-test-infra-real-b200-driver580.105.08-scrubbed-ids.xml",
     "2901"),
])
def test_pci_device_id_is_the_device_half_of_the_printed_id(corpus: Path, family, parse, name, device_id) -> None:
    # Device Id 0x233010DE (text) / 233010DE (XML): the id platforms.py matches platforms by, never the name
    fragment = _gpu_fragment(parse, corpus, family, name)
    assert {g["pci_device_id"] for g in fragment["gpus"]} == {device_id}
