"""Platform values of each lab profile: the one source the node model and the example baselines copy."""

from __future__ import annotations

# Values come from domain.md (A) and the real samples in shared/corpus. Where a value is a
# vendor release string (driver, VBIOS, HCA firmware, PSID) it is one that exists in the wild;
# the corpus file it was seen in is named in a comment. Everything here is plain data (JSON-able)
# so the lead can copy it into inventories/<profile>/baseline.yaml and tests can compare against it.

#: fabricmanager.cfg as shipped by the FM package (keys and defaults from the FM user guide and
#: the NixOS module); the lab writes it verbatim to /usr/share/nvidia/nvswitch/fabricmanager.cfg.
FM_CONFIG_DEFAULTS: dict[str, str] = {
    "LOG_LEVEL": "4",
    "LOG_FILE_NAME": "/var/log/fabricmanager.log",
    "LOG_APPEND_TO_LOG": "1",
    "LOG_FILE_MAX_SIZE": "1024",
    "LOG_USE_SYSLOG": "0",
    "DAEMONIZE": "1",
    "BIND_INTERFACE_IP": "127.0.0.1",
    "STARTING_TCP_PORT": "16000",
    "FABRIC_MODE": "0",
    "FABRIC_MODE_RESTART": "0",
    "STATE_FILE_NAME": "/tmp/fabricmanager.state",
    "FM_CMD_BIND_INTERFACE": "127.0.0.1",
    "FM_CMD_PORT_NUMBER": "6666",
    "FM_STAY_RESIDENT_ON_FAILURES": "0",
    "ACCESS_LINK_FAILURE_MODE": "0",
    "TRUNK_LINK_FAILURE_MODE": "0",
    "NVSWITCH_FAILURE_MODE": "0",
    "ABORT_CUDA_JOBS_ON_FM_EXIT": "1",
    "TOPOLOGY_FILE_PATH": "/usr/share/nvidia/nvswitch",
    "DATABASE_PATH": "/usr/share/nvidia/nvswitch",
}

#: Kernel command line of every profile: IOMMU in passthrough so ACS is not forced on (domain A.6).
KERNEL_CMDLINE_X86 = (
    "BOOT_IMAGE=/boot/vmlinuz-{kernel} root=UUID={root_uuid} ro "
    "intel_iommu=on iommu=pt pci=realloc=off nvme_core.multipath=n console=tty0 console=ttyS0,115200n8"
)
KERNEL_CMDLINE_ARM = (
    "BOOT_IMAGE=/boot/vmlinuz-{kernel} root=UUID={root_uuid} ro "
    "iommu.passthrough=1 iommu=pt init_on_alloc=0 console=ttyAMA0,115200n8"
)

#: Modules lsmod shows on a healthy GPU node (nvidia_peermem is in the driver since R470; the
#: legacy nv_peer_mem must be absent). Order and sizes follow the corpus lsmod excerpts.
KERNEL_MODULES: tuple[tuple[str, int], ...] = (
    ("nvidia_peermem", 16384),
    ("nvidia_uvm", 4956160),
    ("nvidia_drm", 122880),
    ("nvidia_modeset", 1355776),
    ("nvidia", 56344576),
    ("mlx5_ib", 483328),
    ("ib_uverbs", 200704),
    ("ib_ipoib", 155648),
    ("ib_umad", 45056),
    ("rdma_ucm", 36864),
    ("rdma_cm", 139264),
    ("iw_cm", 61440),
    ("ib_cm", 139264),
    ("ib_core", 348160),
    ("mlx5_core", 2134016),
    ("mlxfw", 36864),
)

#: Driver builds an emulated apt repository offers (branch -> full versions, oldest first). A
#: playbook may install any of these with `pkg=version`; anything else fails like apt does.
DRIVER_RELEASES: dict[str, tuple[str, ...]] = {
    "535": ("535.154.05", "535.161.08", "535.183.01", "535.230.02"),
    "550": ("550.90.07", "550.127.05", "550.144.03"),
    "570": ("570.124.06", "570.133.20", "570.148.08", "570.172.08"),
    "580": ("580.65.06", "580.82.07", "580.95.05", "580.105.08"),
}

#: HGX firmware packages an emulated `nvfwupd update_fw -p <package>` knows (file name -> component versions;
#: GPU VBIOS per GPU model). A package file that holds JSON {"nvswitch": "...", "gpu": {...}} works as well.
FW_PACKAGES: dict[str, dict] = {
    "nvfw_HGX-A100x8_0009_241015.1.0.fwpkg": {"nvswitch": "92.10.18.00.01",
                                              "gpu": {"NVIDIA A100-SXM4-80GB": "92.00.45.00.03"}},
    "nvfw_DGX-HGX-H100-H200x8_0012_250115.1.0.fwpkg": {
        "nvswitch": "96.10.6D.00.01",
        "gpu": {"NVIDIA H100 80GB HBM3": "96.00.74.00.0D", "NVIDIA H200": "96.00.A5.00.03"}},
    "nvfw_DGX-HGX-H100-H200x8_0014_250724.1.0.fwpkg": {
        "nvswitch": "96.10.73.00.01",
        "gpu": {"NVIDIA H100 80GB HBM3": "96.00.A5.00.01", "NVIDIA H200": "96.00.A5.00.05"}},
    "nvfw_GB200-P4975_0004_250325.1.0_prod-signed.fwpkg": {"nvswitch": None,
                                                           "gpu": {"NVIDIA GB200": "97.00.B9.00.69"}},
}

#: CUDA version nvidia-smi prints for each driver branch.
CUDA_BY_BRANCH: dict[str, str] = {"535": "12.2", "550": "12.4", "570": "12.8", "580": "13.0"}

#: Debian version suffixes used by NVIDIA's CUDA apt repository.
DRIVER_DEB_SUFFIX = "-0ubuntu1"
FM_DEB_SUFFIX = "-1"


def _pcie_rails(gpu_buses: tuple[str, ...]) -> tuple[dict[str, str], ...]:
    """GPU bus -> rail NIC bus (+1), as on DGX/HGX boards where GPU and NIC share a PCIe switch."""
    return tuple({"gpu_bus": b, "nic_bus": f"{int(b, 16) + 1:02x}"} for b in gpu_buses)


_A100_GPU_BUSES = ("07", "0f", "47", "4e", "87", "90", "b7", "bd")
_H100_GPU_BUSES = ("19", "3b", "4c", "5d", "9b", "bb", "cb", "db")  # corpus: nvidia-smi-q h100 535.161.08
_H200_GPU_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")

PROFILES: dict[str, dict] = {
    "dgx-a100": {
        "name": "dgx-a100",
        "short": "a100",
        "description": "DGX A100: 8x A100-SXM4-80GB, 6x 2nd-gen NVSwitch, 8x ConnectX-6 HDR 200 InfiniBand",
        "arch": "x86_64",
        "gpu": {
            "model": "NVIDIA A100-SXM4-80GB",
            "architecture": "Ampere",
            "count": 8,
            "pci_device_id": "20b2",
            "subsystem_id": "0x147F10DE",
            "buses": _A100_GPU_BUSES,
            "vbios": "92.00.45.00.03",  # corpus: nvidia-smi-q-xml k8s-test-infra a100
            "board_part_number": "692-2G506-0210-002",
            "gpu_part_number": "20B2-895-A1",
            "inforom_image": "G506.0212.00.02",
            "memory_mib": 81920,
            "power_limit_w": 400.0,
            "power_limit_min_w": 100.0,
            "pcie_gen": 4,
            "pcie_width": 16,
            "persistence_mode": "Enabled",
            "ecc_mode": "Enabled",
            # A100 has no per-GPU fabric registration: nvidia-smi prints Fabric State N/A.
            "fabric_registration": False,
        },
        "driver": {"version": "535.161.08", "branch": "535", "kernel_module": "proprietary"},
        "cuda_version": "12.2",
        "fm": {"present": True, "version": "535.161.08", "config": dict(FM_CONFIG_DEFAULTS)},
        "imex": {"present": False},
        "nvlink": {"links_per_gpu": 12, "gbps": 25.0, "topo": "NV12", "nvswitch_gen": 2},
        "nvswitch": {
            "count": 6,
            "pci_device_id": "1af1",
            "buses": ("c4", "c5", "c6", "c7", "c8", "c9"),
            "firmware": "92.10.18.00.01",
            "component_prefix": "HGX_FW_NVSwitch_",
        },
        "fabric": {"clique_id": None, "cluster_uuid": None},
        "pcie": {"rails": _pcie_rails(_A100_GPU_BUSES), "root_port": "Intel Corporation Device 347a (rev 04)",
                 "switch": "Broadcom / LSI PEX88096 PCIe Gen 4 Switch (rev b0)", "link_speed": "16GT/s"},
        "hcas": {
            "compute": {
                "count": 8,
                "ca_type": "MT4123",
                "device_type": "ConnectX6",
                "lspci_name": "Mellanox Technologies MT28908 Family [ConnectX-6]",
                "part_number": "MCX653105A-HDA_Ax",
                "description": "ConnectX-6 VPI adapter card; HDR IB (200Gb/s) and 200GbE; single-port QSFP56; PCIe4.0 x16; tall bracket; ROHS R6",
                "psid": "MT_0000000223",
                "fw": "20.39.1002",
                "pxe": "3.7.0102",
                "uefi": "14.32.0012",
                "rate": 200,
                "width": "4X HDR",
                "link_layer": "InfiniBand",
                "guid_prefix": "b8cef60300",
            },
            "storage": None,
        },
        "ofed": "MLNX_OFED_LINUX-23.10-2.1.3.1",
        "kernel_cmdline": KERNEL_CMDLINE_X86,
        "kernel_release": "5.15.0-1053-nvidia",
        "topo_affinity": (("0-63,128-191", "0"), ("64-127,192-255", "1")),
        "slurm": {"partition": "a100", "cpus": 256, "sockets": 2, "cores": 64, "threads": 2, "memory_mb": 2063937,
                  "gres": "gpu:a100:8"},
    },
    "dgx-h100": {
        "name": "dgx-h100",
        "short": "h100",
        "description": "DGX H100: 8x H100 80GB HBM3, 4x 3rd-gen NVSwitch, 8x ConnectX-7 NDR 400 InfiniBand",
        "arch": "x86_64",
        "gpu": {
            "model": "NVIDIA H100 80GB HBM3",
            "architecture": "Hopper",
            "count": 8,
            "pci_device_id": "2330",
            "subsystem_id": "0x16C110DE",
            "buses": _H100_GPU_BUSES,
            "vbios": "96.00.74.00.0D",  # corpus: nvidia-smi-q h100 535.161.08
            "board_part_number": "692-2G520-0200-000",
            "gpu_part_number": "2330-885-A1",
            "inforom_image": "G520.0200.00.05",
            "memory_mib": 81559,
            "power_limit_w": 700.0,
            "power_limit_min_w": 200.0,
            "pcie_gen": 5,
            "pcie_width": 16,
            "persistence_mode": "Enabled",
            "ecc_mode": "Enabled",
            "fabric_registration": True,
        },
        "driver": {"version": "535.161.08", "branch": "535", "kernel_module": "proprietary"},
        "cuda_version": "12.2",
        "fm": {"present": True, "version": "535.161.08", "config": dict(FM_CONFIG_DEFAULTS)},
        "imex": {"present": False},
        "nvlink": {"links_per_gpu": 18, "gbps": 26.562, "topo": "NV18", "nvswitch_gen": 3},
        "nvswitch": {
            "count": 4,
            "pci_device_id": "22a3",
            "buses": ("83", "84", "85", "86"),  # corpus: nvswitch lspci hgx-h100
            "firmware": "96.10.6D.00.01",
            "component_prefix": "HGX_FW_NVSwitch_",
        },
        # Single-node NVSwitch systems report CliqueId 0 and an all-zero ClusterUUID (corpus h100 XML).
        "fabric": {"clique_id": 0, "cluster_uuid": "00000000-0000-0000-0000-000000000000"},
        "pcie": {"rails": _pcie_rails(_H100_GPU_BUSES), "root_port": "Intel Corporation Device 352a (rev 04)",
                 "switch": "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)", "link_speed": "32GT/s"},
        "hcas": {
            "compute": {
                "count": 8,
                "ca_type": "MT4129",
                "device_type": "ConnectX7",
                "lspci_name": "Mellanox Technologies MT2910 Family [ConnectX-7]",
                "part_number": "MCX75310AAS-NEA_Ax",  # corpus: mlxup cx7 osfp
                "description": "NVIDIA ConnectX-7 HHHL Adapter card; 400GbE / NDR IB (default mode); Single-port OSFP; PCIe 5.0 x16; Crypto Disabled; Secure Boot Enabled;",
                "psid": "MT_0000000838",
                "fw": "28.41.1000",  # corpus: ibstat h100 cx7 all active
                "pxe": "3.7.0400",
                "uefi": "14.34.0012",
                "rate": 400,
                "width": "4X NDR",
                "link_layer": "InfiniBand",
                "guid_prefix": "a088c20300",
            },
            "storage": None,
        },
        "ofed": "MLNX_OFED_LINUX-23.10-2.1.3.1",
        "kernel_cmdline": KERNEL_CMDLINE_X86,
        "kernel_release": "5.15.0-1053-nvidia",
        "topo_affinity": (("0-55,112-167", "0"), ("56-111,168-223", "1")),
        "slurm": {"partition": "h100", "cpus": 224, "sockets": 2, "cores": 56, "threads": 2, "memory_mb": 2063937,
                  "gres": "gpu:h100:8"},
    },
    "hgx-h200": {
        "name": "hgx-h200",
        "short": "h200",
        "description": "HGX H200: 8x H200 141GB, 4x 3rd-gen NVSwitch, 8x ConnectX-7 NDR 400 InfiniBand + 2x BlueField-3 Ethernet",
        "arch": "x86_64",
        "gpu": {
            "model": "NVIDIA H200",  # corpus: nvidia-smi-q h200 590.48.01
            "architecture": "Hopper",
            "count": 8,
            "pci_device_id": "2335",
            "subsystem_id": "0x18BE10DE",
            "buses": _H200_GPU_BUSES,
            "vbios": "96.00.A5.00.03",  # corpus: nvidia-smi-q h200
            "board_part_number": "692-2G520-0280-000",
            "gpu_part_number": "2335-885-A1",
            "inforom_image": "G520.0280.02.02",
            "memory_mib": 143771,
            "power_limit_w": 700.0,
            "power_limit_min_w": 200.0,
            "pcie_gen": 5,
            "pcie_width": 16,
            "persistence_mode": "Enabled",
            "ecc_mode": "Enabled",
            "fabric_registration": True,
        },
        "driver": {"version": "550.127.05", "branch": "550", "kernel_module": "proprietary"},  # corpus: akash FM
        "cuda_version": "12.4",
        "fm": {"present": True, "version": "550.127.05", "config": dict(FM_CONFIG_DEFAULTS)},
        "imex": {"present": False},
        "nvlink": {"links_per_gpu": 18, "gbps": 26.562, "topo": "NV18", "nvswitch_gen": 3},
        "nvswitch": {
            "count": 4,
            "pci_device_id": "22a3",
            "buses": ("83", "84", "85", "86"),
            "firmware": "96.10.73.00.01",
            "component_prefix": "HGX_FW_NVSwitch_",
        },
        "fabric": {"clique_id": 0, "cluster_uuid": "00000000-0000-0000-0000-000000000000"},
        "pcie": {"rails": _pcie_rails(_H200_GPU_BUSES), "root_port": "Intel Corporation Device 352a (rev 04)",
                 "switch": "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)", "link_speed": "32GT/s"},
        "hcas": {
            "compute": {
                "count": 8,
                "ca_type": "MT4129",
                "device_type": "ConnectX7",
                "lspci_name": "Mellanox Technologies MT2910 Family [ConnectX-7]",
                "part_number": "MCX75310AAS-NEA_Ax",
                "description": "NVIDIA ConnectX-7 HHHL Adapter card; 400GbE / NDR IB (default mode); Single-port OSFP; PCIe 5.0 x16; Crypto Disabled; Secure Boot Enabled;",
                "psid": "MT_0000000838",
                "fw": "28.42.1000",
                "pxe": "3.7.0400",
                "uefi": "14.35.0015",
                "rate": 400,
                "width": "4X NDR",
                "link_layer": "InfiniBand",
                "guid_prefix": "946dae0300",
            },
            "storage": {
                "count": 2,
                "ca_type": "MT41692",  # corpus: ibstat h100 mlx5_bond_0 BlueField-3
                "device_type": "BlueField3",
                "lspci_name": "Mellanox Technologies MT43244 BlueField-3 integrated ConnectX-7 network controller (rev 01)",
                "part_number": "900-9D3B6-00CV-AA0_Ax",
                "description": "NVIDIA BlueField-3 B3220 P-Series FHHL DPU; 200GbE (default mode) / NDR200 IB; Dual-port QSFP112; PCIe Gen5.0 x16 with x16 PCIe extension option; 16 Arm cores; 32GB on-board DDR; integrated BMC; Crypto Enabled",
                "psid": "MT_0000000884",
                "fw": "32.41.1000",
                "pxe": "3.7.0400",
                "uefi": "14.35.0015",
                "rate": 200,
                "width": "2X NDR",
                "link_layer": "Ethernet",
                "guid_prefix": "c470bd0300",
                "buses": ("e1", "f1"),
            },
        },
        "ofed": "MLNX_OFED_LINUX-24.10-1.1.4.0",
        "kernel_cmdline": KERNEL_CMDLINE_X86,
        "kernel_release": "5.15.0-1063-nvidia",
        "topo_affinity": (("0-47,96-143", "0"), ("48-95,144-191", "1")),
        "slurm": {"partition": "h200", "cpus": 192, "sockets": 2, "cores": 48, "threads": 2, "memory_mb": 2063937,
                  "gres": "gpu:h200:8"},
    },
    "gb200-nvl72": {
        "name": "gb200-nvl72",
        "short": "gb200",
        "description": "GB200 NVL72 compute tray: 4x GB200 (2 Grace), NVLink to 9 switch trays, 4x ConnectX-7 NDR 400 IB + 2x BlueField-3",
        "arch": "aarch64",
        "gpu": {
            "model": "NVIDIA GB200",  # corpus: nvidia-smi-q-xml k8s-test-infra gb200
            "architecture": "Blackwell",
            "count": 4,
            "pci_device_id": "2941",  # corpus: lspci gb200 compute tray
            "subsystem_id": "0x20CA10DE",
            # Each GPU hangs off its own Grace root port in its own PCI domain (corpus lspci gb200).
            "domains": ("0008", "0009", "0018", "0019"),
            "buses": ("01", "01", "01", "01"),
            "vbios": "97.00.B9.00.69",  # corpus: nvidia-smi-q-xml k8s-test-infra gb200
            "board_part_number": "900-2G548-A801-000",
            "gpu_part_number": "2941-892-A1",
            "inforom_image": "G548.0201.00.06",
            "memory_mib": 189471,
            "power_limit_w": 1200.0,
            "power_limit_min_w": 200.0,
            "pcie_gen": 5,
            "pcie_width": 16,
            "persistence_mode": "Enabled",
            "ecc_mode": "Enabled",
            "fabric_registration": True,
        },
        # R580: the first branch whose nvidia-smi prints the fabric Health Summary GB200 checks need
        # (corpus: nvidia-smi-q-xml k8s-test-infra gb200 580.173.02; 580.105.08 is in the h100/b200 samples).
        "driver": {"version": "580.105.08", "branch": "580", "kernel_module": "open"},
        "cuda_version": "13.0",
        # No FM on GB200 compute trays: the global FM runs in NMX-Controller on the switch trays.
        "fm": {"present": False, "version": None, "config": None},
        "imex": {"present": True, "version": "580.105.08", "port": 50000},
        "nvlink": {"links_per_gpu": 18, "gbps": 53.125, "topo": "NV18", "nvswitch_gen": 5},
        "nvswitch": {"count": 0, "pci_device_id": None, "buses": (), "firmware": None, "component_prefix": None},
        # Per rack (18 trays): one ClusterUUID and one CliqueId; see rack_fabric() below.
        "fabric": {"clique_id": "per-rack", "cluster_uuid": "per-rack"},
        "pcie": {"rails": (), "root_port": "NVIDIA Corporation Device 22b1",
                 "switch": "Mellanox Technologies MT2910 Family [ConnectX-7 PCIe Bridge]", "link_speed": "32GT/s"},
        "hcas": {
            "compute": {
                "count": 4,
                "ca_type": "MT4129",
                "device_type": "ConnectX7",
                "lspci_name": "Mellanox Technologies MT2910 Family [ConnectX-7]",
                "part_number": "MCX750500B-0D00_Ax",
                "description": "NVIDIA ConnectX-7 Mezzanine Board; 400Gb/s NDR IB; Single-port; PCIe 5.0 x16; Crypto Disabled; Secure Boot Enabled",
                "psid": "NVD0000000087",  # corpus: mlnx-fw-updater dgx spark cx7 / ibv_devinfo board NVD0000000087
                "fw": "28.44.1036",
                "pxe": "3.7.0500",
                "uefi": "14.37.0014",
                "rate": 400,
                "width": "4X NDR",
                "link_layer": "InfiniBand",
                "guid_prefix": "5c25730300",
                # Grace PCI domains of the ConnectX-7 mezzanines (corpus lspci gb200).
                "domains": ("0000", "0002", "0010", "0012"),
            },
            "storage": {
                "count": 2,
                "ca_type": "MT41692",
                "device_type": "BlueField3",
                "lspci_name": "Mellanox Technologies MT43244 BlueField-3 integrated ConnectX-7 network controller (rev 01)",
                "part_number": "900-9D3B4-00EN-EA0_Ax",
                "description": "NVIDIA BlueField-3 B3240 P-Series Dual-slot FHHL DPU; 400GbE / NDR IB (default mode); Dual-port QSFP112; PCIe Gen5.0 x16 with x16 PCIe extension option; 16 Arm cores; 32GB on-board DDR; integrated BMC; Crypto Enabled",
                "psid": "MT_0000001010",
                "fw": "32.44.1036",
                "pxe": "3.7.0500",
                "uefi": "14.37.0014",
                "rate": 400,
                "width": "4X NDR",
                "link_layer": "Ethernet",
                "guid_prefix": "e09d730300",
                "domains": ("0006", "0016"),
            },
        },
        "ofed": "MLNX_OFED_LINUX-24.10-1.1.4.0",
        "kernel_cmdline": KERNEL_CMDLINE_ARM,
        "kernel_release": "6.8.0-1021-nvidia-64k",
        # Grace: GPUs are their own NUMA nodes (GPU NUMA ID), so every GPU<->NIC cell is SYS
        # (real GB200 `topo -m`, sgl-project/sglang#11208).
        "topo_affinity": (("0-71", "0,3-9,11-17"), ("72-143", "1,19-25,27-33")),
        "gpu_numa_ids": (2, 10, 18, 26),
        "slurm": {"partition": "gb200", "cpus": 144, "sockets": 2, "cores": 72, "threads": 1, "memory_mb": 884736,
                  "gres": "gpu:gb200:4"},
        "rack_size": 18,
    },
}

#: `--profile mixed`: hosts grouped by profile, in this order and proportion (out of 16).
MIXED_SHARES: tuple[tuple[str, int], ...] = (("dgx-a100", 2), ("dgx-h100", 6), ("hgx-h200", 4), ("gb200-nvl72", 4))

PROFILE_NAMES: tuple[str, ...] = tuple(PROFILES)


def mixed_counts(n: int) -> dict[str, int]:
    """How many of n mixed-lab hosts each profile gets (largest remainder; GB200 rounded to whole racks if possible)."""
    total = sum(share for _, share in MIXED_SHARES)
    raw = {name: n * share / total for name, share in MIXED_SHARES}
    counts = {name: int(v) for name, v in raw.items()}
    left = n - sum(counts.values())
    for name in sorted(raw, key=lambda k: raw[k] - counts[k], reverse=True)[:left]:
        counts[name] += 1
    return counts


def profile_sequence(profile: str, n: int) -> list[str]:
    """The profile of each of n hosts, grouped by profile (mixed) or all the same."""
    if profile == "mixed":
        return [name for name, count in mixed_counts(n).items() for _ in range(count)]
    if profile not in PROFILES:
        raise KeyError(f"unknown profile {profile!r}; known: {', '.join(PROFILE_NAMES)}, mixed")
    return [profile] * n


def deb_version(package: str, version: str) -> str:
    """The Debian version string NVIDIA's apt repository gives a driver/FM/IMEX build."""
    return version + (DRIVER_DEB_SUFFIX if package.startswith("nvidia-driver-") else FM_DEB_SUFFIX)


def packages_for(profile: dict) -> dict[str, str]:
    """Installed NVIDIA packages (name -> Debian version) of a fresh node of a profile."""
    drv = profile["driver"]["version"]
    br = profile["driver"]["branch"]
    pkgs = {
        f"nvidia-driver-{br}": deb_version(f"nvidia-driver-{br}", drv),
        f"libnvidia-nscq-{br}": deb_version(f"libnvidia-nscq-{br}", drv),
    }
    if profile["fm"]["present"]:
        pkgs[f"nvidia-fabricmanager-{br}"] = deb_version(f"nvidia-fabricmanager-{br}", profile["fm"]["version"])
        pkgs[f"cuda-drivers-fabricmanager-{br}"] = deb_version(f"cuda-drivers-fabricmanager-{br}", drv)
    if profile["imex"]["present"]:
        pkgs[f"nvidia-imex-{br}"] = deb_version(f"nvidia-imex-{br}", profile["imex"]["version"])
    return pkgs


def rack_fabric(profile_name: str, rack: int) -> tuple[int, str] | None:
    """(CliqueId, ClusterUUID) shared by every tray of a GB200 rack; None for single-node NVSwitch profiles."""
    if PROFILES[profile_name]["fabric"]["clique_id"] != "per-rack":
        return None
    # The NMX-Controller assigns these per NVLink domain; the lab derives them from the rack number
    # so every tray of one rack agrees and racks differ.
    return 32766 - rack, f"{rack:08x}-6e76-4c72-8a00-{rack:012x}"
