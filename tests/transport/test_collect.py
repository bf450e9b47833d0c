"""Collection orchestration over the replay transport: raw evidence, facts, run.json, errors, progress, input checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricproof import facts as facts_mod
from fabricproof.collect import collect, select_collectors
from fabricproof.collectors import COLLECTORS, default_collectors
from fabricproof.errors import InputError
from fabricproof.facts import mark_not_applicable
from fabricproof.model import ExitCode, Host
from fabricproof.runstore import RunStore, check_host_names, manifest_document
from fabricproof.transport.base import ErrorKind
from fabricproof.transport.replay import ReplayOptions, ReplayTransport

LSMOD = """Module                  Size  Used by
nvidia_peermem         16384  0
ib_core               434176  9 rdma_cm,ib_ipoib,nvidia_peermem,iw_cm,ib_umad,rdma_ucm,ib_uverbs,mlx5_ib,ib_cm
nvidia              54059008  1127 nvidia_uvm,nvidia_peermem,nvidia_modeset
"""
CMDLINE = "BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=UUID=abc ro iommu=pt pci=realloc\n"
PICK = [COLLECTORS["lsmod"], COLLECTORS["cmdline"]]


def prepare_run_dir(path: Path) -> Path:
    return RunStore.create(path).root


def replay(run_dir: Path) -> dict:
    """collect() settings that replay a recorded run."""
    return {"via": "replay", "options": ReplayOptions(run_dir)}


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A hand-made evidence directory: h1 fully recorded, h2 recorded as unreachable, h3 absent."""
    src = tmp_path / "A"
    (src / "raw" / "h1").mkdir(parents=True)
    (src / "raw" / "h1" / "lsmod.txt").write_text(LSMOD)
    (src / "raw" / "h1" / "cmdline.txt").write_text(CMDLINE)
    (src / "run.json").write_text(json.dumps(manifest_document(
        run_id="rec", status="complete", via="ssh", tool_version="0", started_at="", finished_at="", duration_s=1.0,
        hosts=["h1", "h2", "h3"], commands=[], collected=1, command_errors={}, settings={},
        errors={"h2": ("unreachable", "connection refused by 10.0.0.2:22")})))
    return src


def test_collect_writes_evidence_facts_and_manifest_and_reports_errors_per_host(recorded, tmp_path):
    events = []
    out = prepare_run_dir(tmp_path / "B")
    hosts = [Host("h1", groups=("dgx_h100",)), Host("h2"), Host("h3")]
    result = collect(hosts, out, **replay(recorded), collectors=PICK, forks=2,
                     progress=events.append, run_id="r1", inventory="inv.yml")

    assert result.exit_code == ExitCode.INCOMPLETE
    assert set(result.facts_by_host) == {"h1"}
    assert result.errors["h2"].kind is ErrorKind.UNREACHABLE
    assert "connection refused" in result.collection_errors["h2"]
    assert result.errors["h3"].kind is ErrorKind.FAILED and "no raw evidence" in str(result.errors["h3"])

    assert (out / "raw" / "h1" / "lsmod.txt").read_text() == LSMOD
    meta = json.loads((out / "raw" / "h1" / "meta.json").read_text())
    assert meta["lsmod"]["exit_code"] == 0 and meta["lsmod"]["argv"] == ["lsmod"]
    assert meta["lsmod"]["stdout_bytes"] == len(LSMOD.encode()) and set(meta) == {c.id for c in PICK}
    assert sorted(p.name for p in (out / "raw").iterdir()) == ["h1"]  # no staging directory left behind
    loaded = facts_mod.load_dir(out)  # schema-valid, and found through RUNDIR/facts
    assert set(loaded) == {"h1"}
    doc = loaded["h1"]
    assert doc["via"] == "replay" and doc["groups"] == ["dgx_h100"]
    assert doc["kernel"]["modules"]["nvidia_peermem"] is True and doc["kernel"]["cmdline"]["iommu"] == "pt"
    assert doc["collectors"]["lsmod"]["evidence"] == "raw/h1/lsmod.txt"

    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete" and run["run_id"] == "r1" and run["inventory"] == "inv.yml"
    assert run["errors"]["h2"] == {"kind": "unreachable", "message": "connection refused by 10.0.0.2:22"}
    assert run["counts"] == {"hosts": 3, "collected": 1, "not_collected": 2, "with_collector_errors": 0, "pending": 0}
    assert sorted(run["done"]) == ["h1", "h2", "h3"] and run["pending"] == [] and run["workers"] == 1

    assert sorted(e.host for e in events) == ["h1", "h2", "h3"]
    assert [e.done for e in events] == [1, 2, 3] and events[-1].failed == 2 and events[-1].total == 3
    assert {e.host: e.status for e in events} == {"h1": "ok", "h2": "failed", "h3": "failed"}


def test_a_staging_directory_left_by_a_crash_is_neither_replayed_nor_in_the_way(recorded, tmp_path):
    out = prepare_run_dir(tmp_path / "B")
    (out / "raw" / ".h1.partial").mkdir(parents=True)
    (out / "raw" / ".h1.partial" / "lsmod.txt").write_text("half")
    assert ReplayTransport(ReplayOptions(out)).hosts() == []
    result = collect([Host("h1")], out, **replay(recorded), collectors=PICK)
    assert result.exit_code == ExitCode.OK and (out / "raw" / "h1" / "lsmod.txt").read_text() == LSMOD
    assert ReplayTransport(ReplayOptions(out)).hosts() == ["h1"]


def test_replaying_a_collected_run_gives_the_same_facts_and_errors(recorded, tmp_path):
    hosts = [Host("h1"), Host("h2")]
    first = collect(hosts, prepare_run_dir(tmp_path / "B"), **replay(recorded), collectors=PICK)
    second = collect(hosts, prepare_run_dir(tmp_path / "C"), **replay(tmp_path / "B"), collectors=PICK)

    def strip(doc: dict) -> dict:
        return {k: v for k, v in doc.items() if k != "collected_at"}

    assert strip(second.facts_by_host["h1"]) == strip(first.facts_by_host["h1"])
    assert second.collection_errors == first.collection_errors


def test_a_failed_command_is_a_collector_error_and_the_host_still_gets_facts(tmp_path):
    src = tmp_path / "A"
    (src / "raw" / "h1").mkdir(parents=True)
    (src / "raw" / "h1" / "lsmod.txt").write_text(LSMOD)
    (src / "raw" / "h1" / "meta.json").write_text(json.dumps({
        "cmdline": {"exit_code": None, "error": "timed out after 30 s", "duration_s": 30.0}}))
    result = collect([Host("h1")], prepare_run_dir(tmp_path / "B"), **replay(src), collectors=PICK)
    assert result.exit_code == ExitCode.INCOMPLETE and not result.errors
    assert result.collector_errors == {"h1": {"cmdline": "timed out after 30 s"}}
    assert result.facts_by_host["h1"]["kernel"]["modules"]["nvidia_peermem"] is True


def test_select_collectors():
    assert select_collectors(None) == list(default_collectors())
    assert [c.id for c in select_collectors(["nvlink_*"])] == ["nvlink_status", "nvlink_errors", "nvlink_caps"]
    # an exact id may pick an alternative; globs never do
    assert [c.id for c in select_collectors(["nvidia_smi_q_xml,lsmod"])] == ["nvidia_smi_q_xml", "lsmod"]
    assert [c.id for c in select_collectors(["nvidia_smi*"])] == ["nvidia_smi_q"]
    with pytest.raises(InputError, match="both fill /gpu"):
        select_collectors(["nvidia_smi_q", "nvidia_smi_q_xml"])
    with pytest.raises(InputError, match="matches no collector"):
        select_collectors(["nvlinq_*"])


@pytest.mark.parametrize("probe", ["nccl_all_reduce", "ib_pair_bw", "lsmod,dcgm_diag"])
def test_a_probe_is_refused_as_a_plain_collector(probe):
    """--collectors would run it unguarded on a node that may be busy: only the probe path (idle guard) runs it."""
    with pytest.raises(InputError, match=r"is a probe: run it with `validate --probes"):
        select_collectors([probe])


def test_run_directories_are_never_reused(tmp_path):
    run = prepare_run_dir(tmp_path / "r")
    prepare_run_dir(run)  # still empty: fine
    (run / "run.json").write_text("{}")
    with pytest.raises(InputError, match="already holds a collection run"):
        prepare_run_dir(run)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        prepare_run_dir(tmp_path / "file")


@pytest.mark.parametrize("name", ["../etc", "a/b", ".hidden", ".."])
def test_host_names_that_would_escape_or_hide_in_raw_get_a_made_name_inside_it(name, tmp_path):
    """Issue 19.8: such a name is a per-host oddity, not an input error for the fleet; its evidence still never
    escapes raw/ or hides there (the staging directory's leading '.')."""
    from fabricproof.runstore import RunStore

    check_host_names(["ok-host", name])
    store = RunStore(tmp_path)
    for path in (store.raw_dir(name), store.facts_path(name)):
        assert path.parent in (tmp_path / "raw", tmp_path / "facts") and not path.name.startswith(".")


def test_an_empty_host_name_is_refused():
    with pytest.raises(InputError):
        check_host_names(["ok-host", ""])


def test_collectors_failing_where_they_do_not_apply_are_skipped_not_errors():
    h100 = {"gpu": {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]},
            "collectors": {"imex_nodes": {"status": "error", "error": "exit 127: nvidia-imex-ctl: not found"},
                           "ibstat": {"status": "error", "error": "exit 1: no HCA"}}}
    mark_not_applicable(h100)
    assert h100["collectors"]["imex_nodes"]["status"] == "skipped"
    assert h100["collectors"]["imex_nodes"]["error"].startswith("not applicable on h100 (for gb200): exit 127")
    assert h100["collectors"]["ibstat"]["status"] == "error"
    gb200 = {"gpu": {"gpus": [{"name": "NVIDIA GB200"}]},
             "collectors": {"imex_nodes": {"status": "error", "error": "exit 127"}}}
    assert mark_not_applicable(gb200)["collectors"]["imex_nodes"]["status"] == "error"
    unknown = {"collectors": {"imex_nodes": {"status": "error", "error": "exit 127"}}}
    assert mark_not_applicable(unknown)["collectors"]["imex_nodes"]["status"] == "error"


def test_reparse_rebuilds_facts_and_errors_from_a_run_without_writing(recorded, tmp_path):
    from fabricproof.collect import reparse

    run = collect([Host("h1"), Host("h2")], prepare_run_dir(tmp_path / "B"), **replay(recorded),
                  collectors=PICK)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "B").rglob("*"))
    facts, errors = reparse(tmp_path / "B")  # collectors as recorded in run.json, hosts as found in the run
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "B").rglob("*")) == before
    assert errors == run.collection_errors
    drop = ("collected_at", "via")
    assert {k: v for k, v in facts["h1"].items() if k not in drop} == \
        {k: v for k, v in run.facts_by_host["h1"].items() if k not in drop}
    assert facts["h1"]["via"] == "replay" and set(facts["h1"]["collectors"]) == {"lsmod", "cmdline"}


def test_only_a_run_that_is_kept_is_synced_before_it_says_complete(recorded, tmp_path, monkeypatch):
    # syncfs(2) flushes the run directory's whole file system (on a node, the job's writes too): worth it before
    # run.json says complete, not for check --local's temporary run, removed once judged.
    synced: list[Path] = []
    monkeypatch.setattr(RunStore, "sync", lambda store: synced.append(store.root))
    kept = collect([Host("h1")], tmp_path / "kept", collectors=PICK, **replay(recorded))
    scratch = collect([Host("h1")], tmp_path / "scratch", collectors=PICK, durable=False, **replay(recorded))
    assert synced == [kept.run_dir]
    assert json.loads((scratch.run_dir / "run.json").read_text())["status"] == "complete"
