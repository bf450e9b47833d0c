"""The nvidia-smi forms operators type by hand (issue 10.11), against the real layouts of the corpus: the plain
summary table's columns, `-q -d SECTION`, `topo -p2p`, and the real usage error for anything else."""

from __future__ import annotations

import re
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
TABLE_550 = CORPUS / "misc" / "nvidia-smi-default-h100-8gpu-driver550.90.07.txt"
PAGE_RETIREMENT = CORPUS / "nvidia-smi-q" / "q-d-page_retirement-8gpu-azure-driver535.86.10.txt"
INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def _frame(line: str) -> tuple[int, tuple[int, ...]]:
    """A table line's length and where its column rules (| and +) stand."""
    return len(line), tuple(i for i, c in enumerate(line) if c in "|+")


def _kinds(text: str) -> dict[str, tuple[int, tuple[int, ...]]]:
    """The frame of each kind of line of the table, named by what it starts with."""
    out: dict[str, tuple[int, tuple[int, ...]]] = {}
    for line in text.splitlines()[1:]:
        key = re.sub(r"[0-9]", "9", line[:8]) if line.strip() else ""
        if key:
            out.setdefault(key, _frame(line))
    return out


def test_plain_table_columns_line_up_with_the_real_r550_table(make_node) -> None:
    node = make_node("hgx-h200")  # driver 550.127.05, the branch of the corpus sample
    emu = node.run("nvidia-smi")
    assert emu.returncode == 0
    real = TABLE_550.read_text()
    assert _kinds(emu.stdout) == _kinds(real)
    # the same rows in the same order: header, column titles, 3 lines per GPU, then the processes block
    shape = lambda text: [re.sub(r"[^|+=\-]", "", line) for line in text.splitlines()[1:]]  # noqa: E731
    assert shape(emu.stdout) == shape(real)
    emu_lines = emu.stdout.splitlines()
    assert emu_lines[8].startswith("|   0  NVIDIA H200") and "On  |" in emu_lines[8]


def test_plain_table_of_an_r535_node_is_aligned_on_its_own_rules(make_node) -> None:
    out = make_node("dgx-h100").run("nvidia-smi").stdout.splitlines()[1:]
    table = [line for line in out[:out.index("")] if line]
    assert {len(line) for line in table} == {89}
    cols = {_frame(line)[1] for line in table[2:]}
    assert cols == {(0, 42, 65, 88)}, cols
    assert "| NVIDIA H100 80GB HBM3          On  |" in "\n".join(table).replace("|   0  ", "| ")


def test_q_d_page_retirement_has_the_real_layout(make_node) -> None:
    emu = make_node("dgx-h100").run("nvidia-smi", "-q", "-d", "PAGE_RETIREMENT")
    skeleton = lambda text: [re.sub(r"(: ).*$", r"\1", re.sub(r"^GPU \S+", "GPU", line))  # noqa: E731
                             for line in text.splitlines() if not line.startswith(("Timestamp", "Driver", "CUDA"))]
    assert emu.returncode == 0 and skeleton(emu.stdout) == skeleton(PAGE_RETIREMENT.read_text())


def test_q_d_fabric_shows_each_gpus_fabric_block_only(make_node) -> None:
    node = make_node("gb200-nvl72")
    out = node.run("nvidia-smi", "-q", "-d", "FABRIC").stdout
    blocks = [line.strip() for line in out.splitlines() if line.startswith("    ") and not line.startswith("     ")]
    assert blocks == ["Fabric"] * len(node.state()["gpus"])
    assert "        State  " in out and "Product Name" not in out
    one = node.run("nvidia-smi", "-q", "-d", "FABRIC", "-i", "1").stdout
    assert one.count("\nGPU ") == 1 and node.state()["gpus"][1]["bus_id"] in one


def test_topo_p2p_nvlink_matrix(make_node) -> None:
    node = make_node("dgx-h100")
    out = node.run("nvidia-smi", "topo", "-p2p", "n").stdout.splitlines()
    n = len(node.state()["gpus"])
    assert out[0] == " \t" + "".join(f"GPU{i}\t" for i in range(n))
    assert out[1].split("\t")[:3] == [" GPU0", "X", "OK"] and "  NS   = Not supported" in out


def test_nvlink_forms_with_i_and_unsupported_forms(make_node) -> None:
    node = make_node("dgx-h100")
    for form in (["nvlink", "-s", "-i", "0"], ["-i", "0", "nvlink", "-e"], ["nvlink", "-c", "-i", "0"]):
        r = node.run("nvidia-smi", *form)
        assert r.returncode == 0 and r.stdout.startswith("GPU 0: ") and "\nGPU 1: " not in r.stdout, form
    for bad in (["--frobnicate"], ["topo", "-p2p", "x"], ["-q", "-d", "NOPE"]):
        r = node.run("nvidia-smi", *bad)
        assert (r.returncode, r.stdout) == (2, INVALID), bad


def test_query_gpu_headers_and_value_units_match_the_real_csv(make_node) -> None:
    """Every field the lab answers that the real all-fields CSV (590.48.01, H100) also has: the same header
    (with its unit) and values with the same unit suffix, with and without nounits."""
    import csv

    from fabricproof_lab.emu.nvsmi import _QUERY_VALUES

    real_rows = list(csv.reader((CORPUS / "misc" / "query-gpu-csv-allfields-incl-fabric-h100-80gb-hbm3-1gpu-vm-"
                                 "590.48.01-idle.txt").read_text().splitlines(), skipinitialspace=True))
    real = {h.split(" [")[0]: (h, v) for h, v in zip(real_rows[0], real_rows[1])}
    fields = [f for f in _QUERY_VALUES if f in real and f != "count"]
    assert len(fields) >= 25, fields
    node = make_node("dgx-h100")
    out = node.run("nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv").stdout.splitlines()
    header, first = out[0].split(", "), out[1].split(", ")
    assert header == [real[f][0] for f in fields]
    unit = lambda v: re.sub(r"^[^ ]* ?", "", v) if v[:1].isdigit() else ""  # noqa: E731  "700.00 W" -> "W"
    assert [unit(v) for v in first] == [unit(real[f][1]) for f in fields]
    bare = node.run("nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits").stdout
    assert bare.splitlines()[0].split(", ") == [v.rsplit(" ", 1)[0] if unit(v) else v for v in first]


def test_systemctl_and_journalctl_refuse_unknown_options_as_the_real_ones_do(make_node) -> None:
    """This machine's systemd 252 tools are the oracle: they refuse a bad option before talking to any manager."""
    import shutil
    import subprocess

    import pytest

    if not (shutil.which("systemctl", path="/usr/bin:/bin") and shutil.which("journalctl", path="/usr/bin:/bin")):
        pytest.skip("systemctl/journalctl (Debian's systemd) are not installed here")
    node = make_node("dgx-h100")
    for tool, args in (("systemctl", ["--bogus", "status", "x"]), ("systemctl", ["-z", "status", "x"]),
                       ("journalctl", ["--bogus"]), ("journalctl", ["-k", "-z"])):
        real = subprocess.run([tool, *args], capture_output=True, text=True, timeout=30,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C"})
        emu = node.run(tool, *args)
        assert (emu.returncode, emu.stdout, emu.stderr) == (real.returncode, real.stdout, real.stderr), (tool, args)
    # the options runbooks use are accepted
    assert node.run("journalctl", "-b", "-1", "-k", "--no-pager").returncode == 0
    assert node.run("systemctl", "status", "nvidia-fabricmanager", "--no-pager", "-l").returncode == 0
