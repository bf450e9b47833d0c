"""Renderers are pure and deterministic, and print the layouts of the real samples in the corpus."""

from __future__ import annotations

import re
from pathlib import Path

import defusedxml.ElementTree as DET
import pytest
from fabricproof_lab.emu import model, outputs, render_fabric, render_gpu, render_ib, render_links, render_sys
from fabricproof_lab.emu.faults import view

PROFILES = ("dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72")


def node(profile: str, index: int = 1) -> dict:
    return view(model.new_node(profile, index, 1 if profile == "gb200-nvl72" else None, f"n-{index:04d}",
                               f"127.10.0.{index + 1}"))


@pytest.mark.parametrize("profile", PROFILES)
def test_renders_are_deterministic_functions_of_the_state(profile: str) -> None:
    a, b = node(profile), node(profile)
    assert outputs.render_outputs(a) == outputs.render_outputs(b)
    assert outputs.root_files(a) == outputs.root_files(b)
    other = outputs.render_outputs(node(profile, 2))
    assert other["nvidia_smi_q"] != outputs.render_outputs(a)["nvidia_smi_q"]  # identities differ per host


def _q_labels(text: str) -> set[tuple[int, str]]:
    """(indent, label) of every `label : value` line of nvidia-smi -q."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"^( *)(\S.*?)\s+: ", line)
        if m:
            out.add((len(m.group(1)), m.group(2)))
    return out


def _q_corpus_labels(corpus: Path) -> set[tuple[int, str]]:
    labels: set[tuple[int, str]] = set()
    for f in (corpus / "nvidia-smi-q").glob("*.txt"):
        labels |= _q_labels(f.read_text())
    return labels


@pytest.mark.parametrize("profile", PROFILES)
def test_nvidia_smi_q_uses_only_labels_and_columns_of_real_output(profile: str, corpus: Path) -> None:
    text = render_gpu.render_q(node(profile))
    known = _q_corpus_labels(corpus)
    unknown = sorted(_q_labels(text) - known)
    assert not unknown, f"labels no real nvidia-smi -q sample prints: {unknown[:8]}"
    # R535 aligns values at column 44, R570+ at column 57 (corpus 535.161.08 and 590.48.01 samples)
    col = 57 if render_gpu.smi_branch(node(profile)) >= 570 else 44
    assert all(line.index(": ") + 2 == col for line in text.splitlines() if " : " in line)
    assert text.startswith("\n==============NVSMI LOG==============\n\nTimestamp")


def _xml_paths(el, prefix: str = "") -> set[str]:
    here = f"{prefix}/{el.tag}"
    paths = {here}
    for child in el:
        paths |= _xml_paths(child, here)
    return paths


@pytest.mark.parametrize("profile", PROFILES)
def test_nvidia_smi_q_xml_uses_only_elements_of_real_output(profile: str, corpus: Path) -> None:
    text = render_gpu.render_q_xml(node(profile))
    dtd = "v13" if render_gpu.smi_branch(node(profile)) >= 580 else "v12"
    assert text.splitlines()[1] == f'<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_{dtd}.dtd">'
    known: set[str] = set()
    for f in (corpus / "nvidia-smi-q-xml").glob("*.xml"):
        known |= _xml_paths(DET.fromstring(f.read_bytes()))
    mine = _xml_paths(DET.fromstring(text.encode()))
    assert not sorted(mine - known), sorted(mine - known)[:8]


def test_topo_matrix_has_the_native_tab_layout_and_legend(corpus: Path) -> None:
    text = render_links.render_topo(node("dgx-h100"))
    real = (corpus / "nvidia-smi-topo" / "topo-mp-8gpu-12nic-dell-cx7-native-tabs-deepep-issue.txt").read_text()
    header = text.splitlines()[0]
    assert header.startswith("\tGPU0\tGPU1") and header.endswith("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID")
    assert re.match(r"^GPU0\t X \tNV18\t", text.splitlines()[1])
    assert text.splitlines()[9].endswith("\t\t\t\t")  # NIC rows: empty affinity columns, as in the real sample
    legend = [line for line in real[real.index("Legend:"):].splitlines() if line.startswith("  ") and "=" in line]
    for line in legend:
        assert line in text.splitlines()
    assert "  NIC7: mlx5_7" in text.splitlines()


def test_nvlink_status_prints_tab_space_link_lines_and_inactive_links() -> None:
    v = node("dgx-a100")
    v["gpus"][0]["nvlinks"][3].update(active=False, gbps=None)
    for link in v["gpus"][1]["nvlinks"]:
        link.update(active=False, gbps=None)
    lines = render_links.render_nvlink_status(v).splitlines()
    assert lines[0].startswith("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-")
    assert lines[1] == "\t Link 0: 25 GB/s" and lines[4] == "\t Link 3: <inactive>"
    assert lines[14] == "NVML: Unable to retrieve NVLink information as all links are inactive"


def test_nvlink_throughput_prints_the_layout_of_the_real_sample(corpus: Path) -> None:
    real = (corpus / "nvidia-smi-nvlink" / "nvlink-i0-gt-d-h800-8links-data-tx-rx-kib-idle.txt").read_text()
    link_line = re.compile(r"^ {9}Link \d+: Data (Tx|Rx): \d+ KiB$")
    header = re.compile(r"^GPU \d+: \S.* \(UUID: GPU-[0-9a-f-]+\)$")
    for text in (real, render_links.render_nvlink_throughput(node("dgx-h100"))):
        lines = text.splitlines()
        assert all(header.match(line) or link_line.match(line) for line in lines), text[:300]
        assert [line.split(": ", 2)[1] for line in lines[1:5]] == ["Data Tx", "Data Rx", "Data Tx", "Data Rx"]
    v = node("dgx-a100")
    for link in v["gpus"][1]["nvlinks"]:
        link.update(active=False, gbps=None)
    lines = render_links.render_nvlink_throughput(v).splitlines()
    assert lines[1 + 2 * 12 + 1] == render_links.ALL_INACTIVE  # GPU 0: 12 links x Tx/Rx, then GPU 1's header


def test_nvlink_throughput_of_one_gpu_is_its_block_of_the_full_output(make_node) -> None:
    node_ = make_node("dgx-h100")
    full = node_.run("nvidia-smi", "nvlink", "-gt", "d")
    one = node_.run("nvidia-smi", "nvlink", "-i", "0", "-gt", "d")  # the corpus sample's command
    assert full.returncode == one.returncode == 0
    assert one.stdout == "\n".join(full.stdout.splitlines()[:1 + 2 * 18]) + "\n"


@pytest.mark.parametrize(
    "key, family, sample",
    [
        ("ibstat", "ibstat", "h100-cx7-mt4129-ndr400-ib-all-active.txt"),
        ("ibv_devinfo", "ibv_devinfo", "ibv_devinfo-vv-cx6-4123-hdr-2port-one-down-ucx-issue.txt"),
    ],
)
def test_ib_tools_print_only_keys_of_real_output(key: str, family: str, sample: str, corpus: Path) -> None:
    keys = lambda t: {m.group(1) for m in re.finditer(r"^\s*([A-Za-z_][\w ]*?):", t, re.M)}  # noqa: E731
    real = keys((corpus / family / sample).read_text())
    mine = keys(outputs.render_outputs(node("hgx-h200"))[key].stdout)
    assert mine and not sorted(mine - real), sorted(mine - real)


def test_show_gids_header_is_the_mlnx_ofed_one(corpus: Path) -> None:
    real = (corpus / "rdma" / "show_gids-mlx5_0-roce-rdma0-netdev.txt").read_text().splitlines()
    mine = render_ib.render_show_gids(node("hgx-h200")).splitlines()
    assert mine[:2] == real[:2]
    assert mine[-1] == f"n_gids_found={len(mine) - 3}"
    assert re.match(r"^mlx5_8\t1\t2\t0000:0000:0000:0000:0000:ffff:[0-9a-f]{4}:[0-9a-f]{4}\t[\d.]+  \tv1\t\S+$", mine[-7])


def test_mlxfwmanager_and_flint_use_real_field_names(corpus: Path) -> None:
    v = node("dgx-h100")
    v["hcas"][0]["fw_pending"] = "28.43.1014"
    fields = lambda t: {m.group(1).strip() for m in re.finditer(r"^\s*([A-Z][\w ()]+?):  ", t, re.M)}  # noqa: E731
    real_m = set().union(*(fields(f.read_text()) for f in (corpus / "mlxfwmanager").iterdir()))
    assert not fields(render_ib.render_mlxfwmanager(v)) - real_m
    text = render_ib.render_mlxfwmanager(v)
    assert "     FW             28.43.1014     N/A           \n     FW (Running)   28.41.1000" in text
    real_f = set().union(*(fields(f.read_text()) for f in (corpus / "flint").iterdir())) | {"FW Version(Running)"}
    flint = render_ib.render_flint_q(v, v["hcas"][0])
    assert not fields(flint) - real_f
    assert "FW Version:            28.43.1014\nFW Version(Running):   28.41.1000\n" in flint


def test_lspci_forms(corpus: Path) -> None:
    v = node("dgx-h100")
    for line in render_sys.render_lspci_nvidia(v).splitlines():
        assert re.fullmatch(r"[0-9a-f]{2}:[0-9a-f]{2}\.\d (0302|0680|0604): 10de:[0-9a-f]{4}( \(rev a1\))?", line)
    vvv = render_sys.render_lspci_vvv(v)
    real = (corpus / "lspci" / "lspci-vvv-hgx-h100-excerpt-pex890xx-acs-off-pmc-sierra-acs-on-nvswitch-22a3.txt").read_text()
    acs = re.compile(r"^\t\tACSCtl:\t(SrcValid|TransBlk|ReqRedir|CmpltRedir|UpstreamFwd|EgressCtrl|DirectTrans)[+-]", re.M)
    assert len(acs.findall(vvv)) > 8 and acs.search(real)
    assert re.search(r"^\tBus: primary=17, secondary=19, subordinate=19, sec-latency=0$", vvv, re.M)
    gb = render_sys.render_lspci_nvidia(node("gb200-nvl72"))
    assert "0680" not in gb and gb.count(" 0302: 10de:2941 (rev a1)") == 4


def test_fabric_manager_log_and_journal_lines_have_the_real_shapes(corpus: Path) -> None:
    v = node("dgx-h100")
    log = render_fabric.render_fm_log(v).splitlines()
    stamped = re.compile(r"^\[\w{3} \d{2} \d{4} \d{2}:\d{2}:\d{2}\] \[(INFO|ERROR|WARNING)\] \[tid \d+\] \S")
    assert log[0].startswith("Fabric Manager Log initializing at: ")
    assert all(stamped.match(line) or line.startswith(("Fabric Manager Log", "  Index: ")) for line in log)
    assert "[INFO] [tid 1507] Fabric Manager version 535.161.08 is running with the following configuration options" \
        in "\n".join(log)
    journal = render_fabric.render_journal(v, "fm").splitlines()
    assert all(re.match(r"^\w{3} \d{2} \d{2}:\d{2}:\d{2} n-0001 \S+: ", line) for line in journal)
    assert render_fabric.render_fm_version(v) == "Fabric Manager version is : 535.161.08\n"
    real = (corpus / "fabricmanager" / "nv-fabricmanager-version-450.102.04.txt").read_text()
    assert real.replace("450.102.04", "535.161.08") .strip() == render_fabric.render_fm_version(v).strip()


def test_fm_config_holds_the_shipped_defaults() -> None:
    text = render_fabric.render_fm_config(node("dgx-h100"))
    for line in ("FABRIC_MODE=0", "LOG_FILE_NAME=/var/log/fabricmanager.log", "FM_STAY_RESIDENT_ON_FAILURES=0",
                 "ABORT_CUDA_JOBS_ON_FM_EXIT=1"):
        assert line in text.splitlines()


def test_proc_version_and_ofed_and_cmdline(corpus: Path) -> None:
    v = node("gb200-nvl72")
    ver = render_gpu.render_proc_version(v)
    real = (corpus / "misc" / "proc-driver-nvidia-version-open-570.195.03-ubuntu22.txt").read_text()
    pattern = r"^NVRM version: NVIDIA UNIX Open Kernel Module for (x86_64|aarch64)  [\d.]+  Release Build  \(.*\)  .*\nGCC version:  "
    assert re.match(pattern, real) and re.match(pattern, ver)
    assert render_ib.render_ofed_info(v) == "MLNX_OFED_LINUX-24.10-1.1.4.0:\n"
    assert "iommu=pt" in render_sys.render_cmdline(v).split()


def test_nvfwupd_table_matches_the_firmware_guide_layout() -> None:
    lines = render_fabric.render_nvfwupd(node("dgx-h100")).splitlines()
    assert lines[0] == "System Model: DGXH100" and lines[6] == "Firmware Devices:"
    assert lines[7] == "AP Name                        Sys Version                    Pkg Version                  Up-To-Date"
    names = [line.split()[0] for line in lines[9:]]
    assert [n for n in names if n.startswith("HGX_FW_NVSwitch_")] == [f"HGX_FW_NVSwitch_{i}" for i in range(4)]
    assert [n for n in names if n.startswith("HGX_FW_GPU_SXM_")] == [f"HGX_FW_GPU_SXM_{i}" for i in range(1, 9)]


def test_imex_domain_json_lists_every_rack_peer() -> None:
    v = node("gb200-nvl72")
    v["imex_peers"] = [f"127.10.0.{i}" for i in range(1, 19)]
    import json

    doc = json.loads(render_fabric.render_imex_nodes(v)[0])
    assert doc["status"] == "UP" and len(doc["nodes"]) == 18
    assert {n["status"] for n in doc["nodes"].values()} == {"READY"}
    assert len(doc["nodes"]["0"]["connections"]) == 17


def test_nvml_mismatch_replaces_every_nvidia_smi_output_after_an_upgrade_without_reboot() -> None:
    v = node("dgx-h100")
    v["packages"]["nvidia-driver-535"] = "535.183.01-0ubuntu1"
    outs = outputs.render_outputs(v)
    for key in ("nvidia_smi_q", "nvidia_smi_q_xml", "nvlink_status", "topo"):
        assert outs[key] == outputs.Out("Failed to initialize NVML: Driver/library version mismatch\n", "", 18)
    assert outs["ibstat"].rc == 0
