"""The read-only command table and the pre-rendered files of a node (out/ and the fake host root/)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from fabricproof import tools

from . import faults, render_fabric, render_gpu, render_ib, render_links, render_perf, render_sys
from .digest import blake2b, sha256
from .model import Node, installed_driver, installed_fm, nvml_mismatch, profile_of

NVFWUPD_YAML = "BMC_IP: 127.0.0.1\nRF_USERNAME: lab\nRF_PASSWORD: lab\nTargetPlatform: HGX\n"


@dataclass(frozen=True)
class Out:
    """What one command invocation does: print stdout/stderr and exit rc; or hang; or render on every call."""

    stdout: str = ""
    stderr: str = ""
    rc: int = 0
    special: str | None = None  # "hang" | "dynamic" | "flood" | "absent" (no pre-rendered file: the tool's Python form answers)

    @property
    def plain(self) -> bool:
        """True when `cat` of the stdout file reproduces the command exactly."""
        return self.rc == 0 and not self.stderr and self.special is None


#: Invocations no collector makes itself: the calls inside collectors' scripts and what playbooks and operators run.
_OTHERS: tuple[tuple[str, str, str], ...] = (
    ("nvidia-smi", "-L", "nvsmi_list"),
    # the probes' idle guard (fabricproof.probes.guard.GPU_APPS), on every host before each probe and collective round
    ("nvidia-smi", "--query-compute-apps=pid,process_name,used_memory --format=csv,noheader", "compute_apps"),
    ("scontrol", "listpids", "listpids"),  # the idle guard's other call
    ("systemctl", "is-active nvidia-fabricmanager", "active_fm"),
    ("systemctl", "is-active nvidia-imex", "active_imex"),
    ("journalctl", "-u nvidia-imex -b --no-pager", "journal_imex"),
    ("lspci", "-D -d 15b3:", "lspci_mellanox"),
    ("apt-mark", "showhold", "showhold"),
    # the mlxlink collector's loop: one call per RDMA device (a node has at most MAX_RDMA_DEVICES)
    *(("mlxlink", f"-d mlx5_{n} -m -c", f"mlxlink_{n}") for n in range(render_ib.MAX_RDMA_DEVICES)),
)

#: (tool, "$*" as the tool's sh script sees it, output key): every invocation of the tools vocabulary, each under
#: its key, then the others. Several spellings may share a key.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    *((argv[0], " ".join(argv[1:]), tool.key) for tool in tools.TOOLS.values() for argv in tool.answered),
    *_OTHERS,
)

_BY_ARGS = {(tool, args): key for tool, args, key in COMMANDS}
#: Fabric-scope tools: never pre-rendered, the real ones answer on a node cabled to the lab's fabric (simtools).
#: sminfo reads the node's own port everywhere else, and the real fabric on its vantage node.
FABRIC_TOOLS = ("ibnetdiscover", "iblinkinfo", "ibqueryerrors")
#: Faults whose NVLink error counters grow on every read (the output is rendered per call, not pre-rendered).
GROWING_NVLINK_FAULTS = {"nvlink-errors-growing", "nvlink5-errors-growing"}
KEY_TOOL = {key: tool for tool, _args, key in COMMANDS}

#: Host files the collectors read, relative to FABRICPROOF_HOST_ROOT (the lab's `cat`/`tail` map these too).
ROOT_FILES = ("proc/driver/nvidia/version", "proc/cmdline", "proc/sys/kernel/random/boot_id",
              "usr/share/nvidia/nvswitch/fabricmanager.cfg", "var/log/fabricmanager.log",
              "etc/nvidia-imex/nodes_config.cfg", "etc/hostname")


def key_for(tool: str, args: list[str]) -> str | None:
    """The output key of a read-only invocation, or None."""
    return _BY_ARGS.get((tool, " ".join(args)))


def not_found(tool: str) -> Out:
    """What /bin/sh (dash) prints for a command that is not installed."""
    return Out("", f"sh: 1: {tool}: not found\n", 127)


def command_present(view: Node, tool: str) -> bool:
    """Tools that come with packages the node may not have."""
    if tool == "nvidia-smi":
        return installed_driver(view) is not None
    if tool == "nv-fabricmanager":
        return installed_fm(view) is not None
    if tool == "nvidia-imex-ctl":
        return profile_of(view)["imex"]["present"]
    return True


#: Output key -> its renderer; the renderer modules each declare theirs.
RENDERERS: dict[str, Callable[[Node], str]] = {
    **render_gpu.RENDERERS, **render_links.RENDERERS, **render_fabric.RENDERERS, **render_sys.RENDERERS,
    **render_ib.RENDERERS,
}


def render_key(view: Node, key: str) -> Out:
    """One output of the view, including what tool faults and a half-done driver upgrade do to it."""
    tool = KEY_TOOL[key]
    if not command_present(view, tool):
        return not_found(tool)
    if tool == "nvidia-smi":
        if "tool-hangs" in view["faults"]:
            return Out(special="hang")
        if nvml_mismatch(view):
            # The new user-space library meets the old kernel module until the node reboots.
            return Out(render_gpu.NVML_MISMATCH, "", 18)
    if key == "ibstat" and "tool-floods" in view["faults"]:
        return Out(special="flood")
    if key == "ibstat" and "tool-garbage" in view["faults"]:
        from .faults.tool import garbage  # here: the fault families' module is no healthy node's cost

        return Out(garbage(view["hostname"] + "/ibstat"))
    if key == "nvlink_errors" and GROWING_NVLINK_FAULTS & view["faults"].keys():
        return Out(special="dynamic")
    if key == "compute_apps":
        return Out(render_perf.render_compute_apps(view, ["pid", "process_name", "used_memory"], False, True))
    if key == "listpids":
        return Out(*render_perf.render_listpids(view, None))
    if key in ("active_fm", "active_imex"):
        text, rc = render_fabric.is_active(view, "nvidia-fabricmanager" if key == "active_fm" else "nvidia-imex")
        return Out(text, "", rc)
    if key.startswith("mlxlink_"):
        hca = next((h for h in view["hcas"] if h["name"] == "mlx5_" + key.split("_", 1)[1]), None)
        return Out(render_ib.render_mlxlink(view, hca)) if hca is not None else Out(special="absent")
    if key == "nvswitch_firmware" and not view.get("nvfwupd_config", True):
        return Out("", f"Error: config file {tools.NVFWUPD_CONFIG} not found\n", 1)  # as firmware.nvfwupd says
    if tool in FABRIC_TOOLS or (tool == "sminfo" and (view.get("fabric") or {}).get("vantage")):
        return Out(special="absent")
    if key == "sminfo":
        stdout, stderr, rc = render_ib.render_sminfo(view)
        return Out(stdout, stderr, rc)
    if key == "imex_nodes":
        stdout, stderr, rc = render_fabric.render_imex_nodes(view)
        return Out(stdout, stderr, rc)
    return Out(RENDERERS[key](view))


def render_outputs(view: Node) -> dict[str, Out]:
    """Every read-only output of a node, keyed by output key."""
    return {key: render_key(view, key) for key in KEY_TOOL}


def root_files(view: Node) -> dict[str, str | None]:
    """Host files under the fake root (None: the file must not exist on this node)."""
    p = profile_of(view)
    files: dict[str, str | None] = {
        "proc/driver/nvidia/version": render_gpu.render_proc_version(view),
        "proc/cmdline": render_sys.render_cmdline(view),
        "proc/sys/kernel/random/boot_id": boot_id(view) + "\n",
        "usr/share/nvidia/nvswitch/fabricmanager.cfg": render_fabric.render_fm_config(view) if view["fm_config"] else None,
        "var/log/fabricmanager.log": render_fabric.render_fm_log(view) if p["fm"]["present"] else None,
        "etc/nvidia-imex/nodes_config.cfg": ("\n".join(view["imex_peers"] or [view["address"]]) + "\n")
        if p["imex"]["present"] else None,
        "etc/hostname": view["hostname"] + "\n",
        # nvfwupd's BMC config (the lab's BMC needs no credentials); a node without it ("nvfwupd_config": false)
        # is an unconfigured one, whose firmware collector is skipped, not failed.
        tools.NVFWUPD_CONFIG.lstrip("/"): NVFWUPD_YAML if view.get("nvfwupd_config", True) else None,
        # The IMEX channel device (a plain empty file in the lab: mknod needs root); gone after a reboot that did
        # not recreate it (fault imex-channel-missing).
        "dev/nvidia-caps-imex-channels/channel0": "" if p["imex"]["present"] and view.get("imex_channel0", True)
        else None,
    }
    files.update(render_ib.sysfs_files(view))
    return files


def boot_id(view: Node) -> str:
    """A boot id that changes on every (emulated) reboot, as Ansible's reboot module expects."""
    h = sha256(f"{view['hostname']}/boot/{view['boot_count']}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------

def write_atomic(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write via a temp file and rename, so a concurrent `cat` sees the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    payload = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, payload)
    finally:
        os.close(fd)
    os.replace(tmp, path)


MANIFEST = ".rendered.json"


def rendered_files(view: Node) -> dict[str, str | None]:
    """Every file a node's tools read, relative to the node dir: out/<key>, out/<key>.json and root/...

    None marks a file that must not exist (a plain output turned special, a host file the node lacks). An answer
    with stderr or an exit code but nothing special is also out/<key>.sh, which the tool script sources (no Python).
    """
    files: dict[str, str | None] = {}
    for key, out in render_outputs(view).items():
        files[f"out/{key}.sh"] = None
        if out.special == "absent":
            files[f"out/{key}"], files[f"out/{key}.json"] = None, None
        elif out.plain:
            files[f"out/{key}"], files[f"out/{key}.json"] = out.stdout, None
        else:
            files[f"out/{key}"], files[f"out/{key}.json"] = None, json.dumps(asdict(out))
            if out.special is None:
                files[f"out/{key}.sh"] = _answer_script(out)
    for rel, text in root_files(view).items():
        files[f"root/{rel}"] = text
    return files


def _answer_script(out: Out) -> str:
    """/bin/sh that prints `out` as the tool would and exits with its code (sourced by the tool script)."""
    def quoted(text: str) -> str:
        return "'" + text.replace("'", "'\\''") + "'"

    return ((f"printf '%s' {quoted(out.stdout)}\n" if out.stdout else "")
            + (f"printf '%s' {quoted(out.stderr)} >&2\n" if out.stderr else "") + f"exit {out.rc}\n")


def _digest(text: str) -> str:
    return blake2b(text.encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()


def _write_new(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode("utf-8", "surrogateescape"))
    finally:
        os.close(fd)


def _place(path: str, text: str, labdir: str, fresh: bool) -> None:
    """Write a file, or (re)point a symlink to a shared directory of the lab (render_ib.Link)."""
    if isinstance(text, render_ib.Link):
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        elif os.path.isdir(path):
            import shutil  # here: a shared link seldom turns back into a directory; the import costs every render

            shutil.rmtree(path)
        os.symlink(f"{labdir}/{text}", path)
        return
    if os.path.islink(path):
        os.unlink(path)
    if fresh:
        _write_new(path, text)
    else:
        write_atomic(Path(path), text)


def ensure_shared(labdir: Path) -> None:
    """The lab-wide shared files nodes link to (created once per lab dir)."""
    marker = labdir / render_ib.ZERO_COUNTERS / "symbol_error"
    if marker.exists():
        return
    for rel, text in render_ib.zero_counter_files().items():
        path = labdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)


def render_node(node_dir: Path, node: Node) -> None:
    """Re-render a node's files from its stored state, writing only those whose content changed.

    A manifest of content digests (<node>/.rendered.json) makes a mutation cost a few writes instead of
    dozens. A node without a manifest is being created: nobody reads it yet, so its files are written in
    place (half the system calls of tmp+rename).
    """
    files = rendered_files(faults.view(node))
    base = str(node_dir)
    labdir = str(node_dir.parent.parent)
    try:
        old: dict[str, str] = json.loads((node_dir / MANIFEST).read_text())
    except (FileNotFoundError, ValueError):
        old = {}
    fresh = not old
    if fresh:
        ensure_shared(node_dir.parent.parent)
    new: dict[str, str] = {}
    made: set[str] = set()
    gone: list[str] = []
    for rel, text in files.items():
        path = f"{base}/{rel}"
        if text is None:
            if rel in old or fresh:
                gone.append(path)
            continue
        digest = _digest(("->" if isinstance(text, render_ib.Link) else "") + text)
        new[rel] = digest
        if old.get(rel) == digest:
            continue
        parent = path.rsplit("/", 1)[0]
        if parent not in made:
            if os.path.islink(parent):  # a shared counters link becomes a real directory
                os.unlink(parent)
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        _place(path, text, labdir, fresh)
    # Removed last: an output turning from plain to special (out/<key> -> out/<key>.json) is answered by one of them
    # at every moment, so a tool read while a fault is injected never finds neither.
    for path in gone:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    write_atomic(node_dir / MANIFEST, json.dumps(new, separators=(",", ":")))
