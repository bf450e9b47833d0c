"""Mutating tools behave like the real ones, so unmodified playbook commands change lab nodes."""

from __future__ import annotations

from fabricproof import breaker
from fabricproof.collectors import COLLECTORS

MISMATCH = ("fabric manager NVIDIA GPU driver interface version 535.161.08 don't match with driver version "
            "535.183.01. Please update with matching NVIDIA driver package.")


def fabric_states(node) -> set[tuple[str, str]]:
    r = node.run("nvidia-smi", "--query-gpu=fabric.state,fabric.status", "--format=csv,noheader")
    assert r.returncode == 0, r.stdout + r.stderr
    return {tuple(line.split(", ")) for line in r.stdout.splitlines()}


def test_driver_upgrade_without_fm_leaves_fm_failing_with_the_real_line(make_node) -> None:
    node = make_node("dgx-h100")
    assert node.run("systemctl", "stop", "nvidia-fabricmanager").returncode == 0
    up = node.run("apt-get", "install", "-y", "nvidia-driver-535=535.183.01-0ubuntu1")
    assert up.returncode == 0 and "Setting up nvidia-driver-535 (535.183.01-0ubuntu1) ..." in up.stdout
    # user space is new, the kernel module is still the old one until the reboot
    smi = node.run("nvidia-smi", "-q")
    assert (smi.returncode, smi.stdout) == (18, "Failed to initialize NVML: Driver/library version mismatch\n")
    assert node.run("reboot").returncode == 0
    assert node.run("nv-fabricmanager", "--version").stdout == "Fabric Manager version is : 535.161.08\n"
    active = node.run("systemctl", "is-active", "nvidia-fabricmanager")
    assert (active.stdout, active.returncode) == ("failed\n", 3)
    journal = node.run("journalctl", "-u", "nvidia-fabricmanager", "-b", "--no-pager").stdout
    assert "nv-fabricmanager[" in journal and MISMATCH in journal
    assert "nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE" in journal
    assert MISMATCH in node.run("tail", "-n", "5000", "/var/log/fabricmanager.log").stdout
    assert fabric_states(node) == {("In Progress", "N/A")}
    parsed = COLLECTORS["fm_journal"].parse(journal)
    assert parsed["version_mismatch"] == {"fm_version": "535.161.08", "driver_version": "535.183.01"}
    # starting it again fails the same way, with systemd's message
    start = node.run("systemctl", "start", "nvidia-fabricmanager")
    assert start.returncode == 1 and "Job for nvidia-fabricmanager.service failed" in start.stderr
    # the fix: the matching FM, then a restart
    assert node.run("apt-get", "install", "-y", "nvidia-fabricmanager-535=535.183.01-1").returncode == 0
    assert node.run("systemctl", "restart", "nvidia-fabricmanager").returncode == 0
    assert fabric_states(node) == {("Completed", "Success")}
    assert node.run("systemctl", "is-active", "nvidia-fabricmanager").stdout == "active\n"


def test_driver_and_fm_upgraded_together_come_back_healthy_after_reboot(make_node) -> None:
    node = make_node("hgx-h200")
    r = node.run("apt-get", "install", "-y", "nvidia-driver-550=550.144.03-0ubuntu1",
                 "nvidia-fabricmanager-550=550.144.03-1", "libnvidia-nscq-550=550.144.03-1")
    assert r.returncode == 0, r.stderr
    assert node.run("reboot").returncode == 0
    assert fabric_states(node) == {("Completed", "Success")}
    q = COLLECTORS["nvidia_smi_q"].parse(node.run("nvidia-smi", "-q").stdout)
    assert q["driver_version"] == "550.144.03"
    assert node.run("nv-fabricmanager", "--version").stdout.strip().endswith("550.144.03")
    assert "550.144.03" in node.run("cat", "/proc/driver/nvidia/version").stdout


def test_branch_change_replaces_the_old_branch_packages(make_node) -> None:
    node = make_node("dgx-h100")
    r = node.run("apt-get", "install", "-y", "cuda-drivers-fabricmanager-550=550.127.05-1")
    assert r.returncode == 0, r.stderr
    assert "The following packages will be REMOVED:" in r.stdout
    listing = node.run("dpkg-query", "-W", "-f=${Package} ${Version}\\n", "nvidia-*").stdout.split("\n")
    assert "nvidia-driver-550 550.127.05-0ubuntu1" in listing and "nvidia-fabricmanager-550 550.127.05-1" in listing
    assert not any(line.startswith("nvidia-driver-535") for line in listing)


def test_apt_refuses_unknown_versions_held_packages_and_silent_downgrades(make_node) -> None:
    node = make_node("dgx-a100")
    missing = node.run("apt-get", "install", "-y", "nvidia-driver-535=535.999.99-0ubuntu1")
    assert missing.returncode == 100 and "E: Version '535.999.99-0ubuntu1' for 'nvidia-driver-535' was not found" in missing.stderr
    assert node.run("apt-get", "install", "-y", "nvidia-foo").returncode == 100
    assert node.run("apt-mark", "hold", "nvidia-driver-535", "nvidia-fabricmanager-535").stdout == (
        "nvidia-driver-535 set on hold.\nnvidia-fabricmanager-535 set on hold.\n")
    assert node.run("apt-mark", "showhold").stdout == "nvidia-driver-535\nnvidia-fabricmanager-535\n"
    held = node.run("apt-get", "install", "-y", "nvidia-driver-535=535.183.01-0ubuntu1")
    assert held.returncode == 100 and "--allow-change-held-packages" in held.stderr
    assert node.run("dpkg-query", "-W", "nvidia-driver-535").stdout == "nvidia-driver-535\t535.161.08-0ubuntu1\n"
    ok = node.run("apt-get", "install", "-y", "--allow-change-held-packages", "nvidia-driver-535=535.183.01-0ubuntu1")
    assert ok.returncode == 0
    assert node.run("apt-mark", "unhold", "nvidia-driver-535").stdout == "Canceled hold on nvidia-driver-535.\n"
    down = node.run("apt-get", "install", "-y", "nvidia-driver-535=535.154.05-0ubuntu1")
    assert down.returncode == 100 and "--allow-downgrades" in down.stderr
    assert node.run("apt-get", "install", "-y", "--allow-downgrades", "nvidia-driver-535=535.154.05-0ubuntu1").returncode == 0
    assert node.run("dpkg-query", "-W", "nvidia-driver-535").stdout == "nvidia-driver-535\t535.154.05-0ubuntu1\n"


def test_hca_firmware_is_pending_until_mlxfwreset(make_node) -> None:
    node = make_node("dgx-h100")
    dev = node.state()["hcas"][2]["bdf"]
    image = "fw-ConnectX7-rel-28_43_1014-MCX75310AAS-NEA_Ax-UEFI-14.36.16-FlexBoot-3.7.500.signed.bin"
    r = node.run("mlxfwmanager", "-u", "-y", "-d", dev, "-i", image)
    assert r.returncode == 0 and "Restart needed for updates to take effect." in r.stdout
    ibstat = COLLECTORS["ibstat"].parse(node.run("ibstat").stdout)
    assert ibstat["hcas"][2]["fw_version"] == "28.41.1000"  # still running the old image
    fw = COLLECTORS["mlxfwmanager"].parse(node.run("mlxfwmanager", "--query").stdout)["devices"][2]
    assert (fw["fw_current"], fw["fw_running"], fw["fw_activation_pending"]) == ("28.43.1014", "28.41.1000", True)
    reset = node.run("mlxfwreset", "-d", dev, "-l", "3", "-y", "reset")
    assert reset.returncode == 0 and "-I- FW was loaded successfully." in reset.stdout
    ibstat = COLLECTORS["ibstat"].parse(node.run("ibstat").stdout)
    assert [h["fw_version"] for h in ibstat["hcas"]] == ["28.41.1000"] * 2 + ["28.43.1014"] + ["28.41.1000"] * 5


def test_flint_burn_is_pending_until_reboot_and_refuses_a_foreign_psid(make_node) -> None:
    node = make_node("dgx-a100")
    dev = node.state()["hcas"][0]["bdf"]
    foreign = node.run("flint", "-d", dev, "-i", "fw-ConnectX6-rel-20_41_1000-MT_0000000594.bin", "-y", "burn")
    assert foreign.returncode == 1 and "PSID mismatch" in foreign.stderr
    burn = node.run("flint", "-d", dev, "-i", "fw-ConnectX6-rel-20_41_1000-MCX653105A-HDA_Ax.bin", "-y", "burn")
    assert burn.returncode == 0 and "New FW version:               20.41.1000" in burn.stdout
    q = COLLECTORS["flint"].parse(node.run("flint", "-d", dev, "q").stdout)
    assert q["fw_version"] == "20.41.1000"
    assert open(node.dir / "root/sys/class/infiniband/mlx5_0/fw_ver").read() == "20.39.1002\n"
    node.run("reboot")
    assert open(node.dir / "root/sys/class/infiniband/mlx5_0/fw_ver").read() == "20.41.1000\n"


def test_nvfwupd_update_is_pending_until_power_cycle(make_node) -> None:
    node = make_node("dgx-h100")
    pkg = "nvfw_DGX-HGX-H100-H200x8_0014_250724.1.0.fwpkg"
    before = node.run("nvfwupd", "-c", "/etc/fabricproof/nvfwupd.yaml", "show_version", "-p", pkg)
    assert "HGX_FW_NVSwitch_0              96.10.6D.00.01                 96.10.73.00.01                 No" in before.stdout
    r = node.run("nvfwupd", "-t", "ip=10.0.0.1", "user=admin", "password=x", "update_fw", "-p", pkg, "-y")
    assert r.returncode == 0 and "Firmware update successful!" in r.stdout
    fw = lambda: COLLECTORS["nvswitch_firmware"].parse(  # noqa: E731
        node.run("nvfwupd", "-c", "/etc/fabricproof/nvfwupd.yaml", "show_version").stdout)
    assert fw()["nvswitch_versions"] == ["96.10.6D.00.01"] * 4
    node.run("shutdown", "-r", "now")
    assert fw()["nvswitch_versions"] == ["96.10.73.00.01"] * 4
    assert set(fw()["gpu_versions"]) == {"96.00.A5.00.01"}


def test_setpci_sets_acs_until_the_next_reboot(make_node) -> None:
    node = make_node("dgx-h100")
    bridge = "17:00.0"  # the switch port above GPU 0 (19:00.0)
    acs = lambda: COLLECTORS["lspci_vvv"].parse(node.run("lspci", "-vvv").stdout)["gpu_nic_path_acs_enabled"]  # noqa: E731
    assert node.run("setpci", "-s", bridge, "ECAP_ACS+0x6.w").stdout == "0000\n"
    assert node.run("setpci", "-s", bridge, "ECAP_ACS+0x6.w=001d").returncode == 0
    assert acs() == [bridge]
    assert node.run("setpci", "-s", bridge, "ECAP_ACS+0x6.w").stdout == "001d\n"
    node.run("reboot")
    assert acs() == []  # the BIOS default (ACS off) comes back
    node.run("setpci", "-s", bridge, "ECAP_ACS+0x6.w=0004:0004")  # value:mask sets ReqRedir only
    assert acs() == [bridge]
    assert node.run("setpci", "-s", bridge, "ECAP_ACS+0x6.w=0000").returncode == 0 and acs() == []


def test_scontrol_drain_and_resume(make_node) -> None:
    node = make_node("dgx-h100")
    name = node.state()["hostname"]
    other = make_node("dgx-h100")
    refused = node.run("scontrol", "update", f"nodename={name}", "state=drain")
    assert refused.returncode == 1 and "You must specify a reason" in refused.stderr
    assert node.run("scontrol", "update", f"NodeName={name}", "State=DRAIN", "Reason=CHG-42 driver").returncode == 0
    shown = node.run("scontrol", "show", "node", name).stdout
    assert "State=IDLE+DRAIN " in shown and "Reason=CHG-42 driver [root@" in shown
    # another node of the lab by name (as from a controller)
    other_name = other.state()["hostname"]
    assert node.run("scontrol", "update", f"nodename={other_name}", "state=drain", "reason=x").returncode == 0
    assert "State=IDLE+DRAIN" in other.run("scontrol", "show", "node", other_name).stdout
    assert node.run("scontrol", "update", f"nodename={name}", "state=resume").returncode == 0
    shown = node.run("scontrol", "show", "node", name).stdout
    assert "State=IDLE " in shown and "Reason=" not in shown
    assert node.run("scontrol", "show", "node", "nope-0001").returncode == 1
    # -o: one line a node, and every lab node without a name, as the drain breaker reads Slurm's whole node list.
    listed = breaker.parse_nodes(node.run("scontrol", "-o", "show", "node").stdout)
    assert [(n.name, n.state, n.reason, n.partitions) for n in listed] == [
        (name, "IDLE", None, ("h100",)), (other_name, "IDLE+DRAIN", "x", ("h100",))]
    assert [n.name for n in breaker.parse_nodes(node.run("scontrol", "show", "node", "-o", other_name).stdout)] == \
        [other_name]


def test_modprobe_and_rmmod_follow_module_dependencies(make_node) -> None:
    node = make_node("hgx-h200")
    lsmod = lambda: COLLECTORS["lsmod"].parse(node.run("lsmod").stdout)  # noqa: E731
    busy = node.run("rmmod", "nvidia")
    assert busy.returncode == 1 and busy.stderr.startswith("rmmod: ERROR: Module nvidia is in use by: ")
    assert node.run("rmmod", "nvidia_peermem").returncode == 0 and lsmod()["nvidia_peermem"] is False
    assert node.run("rmmod", "nvidia_peermem").stderr == "rmmod: ERROR: Module nvidia_peermem is not currently loaded\n"
    assert node.run("modprobe", "nvidia-peermem").returncode == 0 and lsmod()["loaded"][0] == "nvidia_peermem"
    missing = node.run("modprobe", "nv_peer_memx")
    assert missing.returncode == 1 and "not found in directory /lib/modules/5.15.0-1063-nvidia" in missing.stderr


def test_systemctl_verbs_and_unit_state(make_node) -> None:
    node = make_node("dgx-a100")
    show = lambda: COLLECTORS["fm_service"].parse(node.run(*COLLECTORS["fm_service"].argv).stdout)  # noqa: E731
    assert node.run("systemctl", "disable", "--now", "nvidia-fabricmanager").returncode == 0
    assert (show()["active_state"], show()["unit_file_state"]) == ("inactive", "disabled")
    assert node.run("systemctl", "is-enabled", "nvidia-fabricmanager").returncode == 1
    node.run("reboot")
    assert show()["active_state"] == "inactive"  # disabled units do not start at boot
    assert node.run("systemctl", "enable", "--now", "nvidia-fabricmanager.service").returncode == 0
    assert (show()["active_state"], show()["unit_file_state"]) == ("active", "enabled")
    status = node.run("systemctl", "status", "nvidia-fabricmanager")
    assert status.returncode == 0 and "Active: active (running)" in status.stdout
    assert COLLECTORS["fm_service"].parse(status.stdout)["active"] is True
    nf = node.run("systemctl", "start", "nvidia-imex")
    assert nf.returncode == 5 and "Unit nvidia-imex.service not found." in nf.stderr
    node.run("systemctl", "stop", "nvidia-persistenced")
    q = COLLECTORS["nvidia_smi_q"].parse(node.run("nvidia-smi", "-q").stdout)
    assert {g["persistence_mode"] for g in q["gpus"]} == {"Disabled"}


def test_reboot_changes_the_boot_id_ansible_waits_for(make_node) -> None:
    node = make_node("gb200-nvl72")
    first = node.run("cat", "/proc/sys/kernel/random/boot_id").stdout
    node.run("sudo", "-H", "-S", "-n", "-u", "root", "/bin/sh", "-c", "reboot")
    second = node.run("cat", "/proc/sys/kernel/random/boot_id").stdout
    assert first != second and len(second.strip()) == 36
    assert node.run("cat", "/etc/os-release").returncode == 0  # other paths are the machine's own files


def test_tools_that_a_node_does_not_have_are_not_found(make_node) -> None:
    gb = make_node("gb200-nvl72")
    r = gb.run("nv-fabricmanager", "--version")
    assert (r.returncode, r.stderr) == (127, "sh: 1: nv-fabricmanager: not found\n")
    h = make_node("dgx-h100")
    assert h.run("nvidia-imex-ctl", "-N", "-j").returncode == 127
    h.run("apt-get", "remove", "-y", "nvidia-driver-535")
    assert h.run("nvidia-smi", "-L").returncode == 127
    usage = h.run("ibstat", "--bogus")
    # what Debian's infiniband-diags 44 ibstat does (tests/lab_emu/test_emu_ibstat.py holds the two together)
    assert usage.returncode == 2 and usage.stderr.startswith("ibstat: unrecognized option '--bogus'\n\nUsage: ibstat")


def test_gpu_reset_follows_the_fabric_manager_procedure(make_node) -> None:
    """stop clients -> stop FM -> nvidia-smi -r -> start FM (FM user guide); a reset under FM is refused."""
    node = make_node("dgx-h100")
    refused = node.run("nvidia-smi", "-r")
    assert refused.returncode == 255 and "In use by another client" in refused.stdout
    for unit in ("nvidia-dcgm", "nvidia-fabricmanager"):
        assert node.run("systemctl", "stop", unit).returncode == 0
    reset = node.run("nvidia-smi", "-r", "-i", "0")
    assert reset.returncode == 0 and reset.stdout == "GPU 00000000:19:00.0 was successfully reset.\nAll done.\n"
    assert ("In Progress", "N/A") in fabric_states(node)
    assert node.run("systemctl", "start", "nvidia-fabricmanager").returncode == 0
    assert fabric_states(node) == {("Completed", "Success")}
    tail = node.run("journalctl", "-xeu", "nvidia-fabricmanager", "-n", "1").stdout
    assert tail.endswith("Started nvidia-fabricmanager.service - NVIDIA fabric manager service.\n")
