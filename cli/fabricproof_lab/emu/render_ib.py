"""Renderers of InfiniBand/RDMA output: ibstat, ibstatus, ibv_devinfo -v, ibdev2netdev, show_gids, rdma link,
mlxfwmanager --query, flint q, ofed_info -s and the /sys/class/infiniband tree."""

from __future__ import annotations

from collections.abc import Callable

from .model import Node, profile_of

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

_STATE_NUM = {"Down": 1, "Initializing": 2, "Armed": 3, "Active": 4}
_PHYS_NUM = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4, "LinkUp": 5}
_VERBS_STATE = {"Down": "PORT_DOWN", "Initializing": "PORT_INIT", "Armed": "PORT_ARMED", "Active": "PORT_ACTIVE"}
_VERBS_PHYS = {"Polling": "POLLING", "Disabled": "DISABLED", "LinkUp": "LINK_UP", "Sleep": "SLEEP"}
_MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
# Lane speed ibv_devinfo prints for a 4X port at each total rate.
_LANE = {400: "100.0 Gbps (128)", 200: "50.0 Gbps (64)", 100: "25.0 Gbps (32)", 40: "10.0 Gbps (8)",
         10: "2.5 Gbps (1)"}


def _colon_guid(guid: str) -> str:
    """'a088c20300010100' -> 'a088:c203:0001:0100' (ibv_devinfo and sysfs spelling)."""
    return ":".join(guid[i:i + 4] for i in range(0, 16, 4))


def _mac(guid: str) -> str:
    """The base MAC derived from a base GUID (drop the 0300 in the middle, as mlxfwmanager shows)."""
    return guid[:6] + guid[10:]


def _gid(guid: str) -> str:
    return "fe80:0000:0000:0000:" + _colon_guid(guid)


def port_rate_text(port: dict[str, Any]) -> str:
    """sysfs/ibstatus rate text: '400 Gb/sec (4X NDR)'."""
    return f"{port['rate']} Gb/sec ({port['width']})"


def capability_mask(port: dict[str, Any]) -> str:
    """PortInfo CapabilityMask as ibstat and sysfs cap_mask print it (a ConnectX-7 IB port; a RoCE port's)."""
    return "0xa751e848" if port["link_layer"] == "InfiniBand" else "0x00010000"


def ibstat_port_lines(port: dict[str, Any], pre: str = "\t\t") -> list[str]:
    """The lines ibstat prints for one port (indented under its CA, or bare for `ibstat CA PORT`)."""
    return [f"{pre}State: {port['state']}", f"{pre}Physical state: {port['phys_state']}", f"{pre}Rate: {port['rate']}",
            f"{pre}Base lid: {port['base_lid']}", f"{pre}LMC: 0", f"{pre}SM lid: {port['sm_lid']}",
            f"{pre}Capability mask: {capability_mask(port)}", f"{pre}Port GUID: 0x{port['port_guid']}",
            f"{pre}Link layer: {port['link_layer']}"]


def ibstat_ca_lines(hca: dict[str, Any], ports: bool = True) -> list[str]:
    """One CA of ibstat (-s: without its ports)."""
    out = [f"CA '{hca['name']}'", f"\tCA type: {hca['ca_type']}", f"\tNumber of ports: {len(hca['ports'])}",
           f"\tFirmware version: {hca['fw']}", "\tHardware version: 0", f"\tNode GUID: 0x{hca['node_guid']}",
           f"\tSystem image GUID: 0x{hca['node_guid']}"]
    for port in hca["ports"] if ports else ():
        out += [f"\tPort {port['port']}:", *ibstat_port_lines(port)]
    return out


def render_ibstat(view: Node) -> str:
    """`ibstat` with its native TAB indentation."""
    return "\n".join(line for hca in view["hcas"] for line in ibstat_ca_lines(hca)) + "\n"


#: Port GUID of the lab fabric's subnet manager (a switch of the lab; the LID every IB port names as SM lid).
SM_GUID = "0x7cfe900300a1c4e1"


def render_sminfo(view: Node) -> tuple[str, str, int]:
    """`sminfo` (infiniband-diags): the master SM the first linked InfiniBand port names (corpus ib-diag
    sminfo-master-*); with no SM, the query fails as sminfo reports it, on stderr with exit 255."""
    ports = [p for h in view["hcas"] for p in h["ports"] if p["link_layer"] == "InfiniBand"]
    sm = next((p["sm_lid"] for p in ports if p["sm_lid"]), 0)
    if not sm:
        return "", "sminfo: iberror: failed: query\n", 255
    activity = 4484000 + view["boot_count"]  # the SM's counter, not the node's clock: stable between two reads
    return f"sminfo: sm lid {sm} sm guid {SM_GUID}, activity count {activity} priority 14 state 3 SMINFO_MASTER\n", "", 0


# mlxlink's names for a port's speed and the FEC it runs, per IB generation (corpus mlxlink/ and ib-diag/ samples:
# NDR on a CX-7, HDR on a CX-6, Ethernet 100G); other speeds print the Ethernet form.
_MLXLINK_IB = {"NDR": ("IB-NDR", "Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1)"),
               "HDR": ("IB-HDR", "RS-FEC - (544,514) + PLR"), "EDR": ("IB-EDR", "Standard LL RS-FEC - RS(271,257)")}
MLXLINK_BER_NONE = "15E-255"  # the floor mlxlink prints for "no error"
MAX_RDMA_DEVICES = 12  # mlx5_0..mlx5_11: more than any lab profile has (8 compute + 2 storage)


def _mlx(label: str, value: object) -> str:
    return f"{label:<35}: {value}"


def render_mlxlink(view: Node, hca: dict[str, Any]) -> str:
    """`mlxlink -d <dev> -m -c` for port 1 in the layout of the corpus samples (sections, 35-column labels);
    a port's "phy" entry (faults) overrides the counters and the recommendation."""
    port = hca["ports"][0]
    phy = port.get("phy") or {}
    up = port["state"] == "Active"
    gen = port["width"].split()[-1] if port["link_layer"] == "InfiniBand" else ""
    speed, fec = _MLXLINK_IB.get(gen, (f"{port['rate']}G", "Standard RS-FEC - RS(528,514)"))
    out = ["", "Operational Info", "----------------", _mlx("State", port["state"]),
           _mlx("Physical state", port["phys_state"]), _mlx("Speed", speed if up else "N/A"),
           _mlx("Width", port["width"].split()[0].lower() if up else "N/A"), _mlx("FEC", fec if up else "N/A"),
           _mlx("Loopback Mode", "No Loopback"), _mlx("Auto Negotiation", "ON"), "",
           "Troubleshooting Info", "--------------------", _mlx("Status Opcode", 0 if up else "N/A"),
           _mlx("Group Opcode", "N/A"),
           _mlx("Recommendation", phy.get("recommendation", "No issue was observed") if up else "N/A"), "",
           "Tool Information", "----------------", _mlx("Firmware Version", hca["fw"]), _mlx("amBER Version", "6.4"),
           _mlx("MFT Version", "mft 4.30.1-8"), "",
           "Module Info", "-----------", _mlx("Identifier", "OSFP" if gen == "NDR" else "QSFP56"),
           _mlx("Compliance", f"IB {gen}" if gen else "100GBASE-CR4"),
           _mlx("Cable Type", "Passive copper cable"), _mlx("Vendor Name", "Nvidia"),
           _mlx("Vendor Part Number", "MCP4Y10-N002" if gen == "NDR" else "MCP1650-H002E26"),
           _mlx("Vendor Serial Number", f"MT{int(hca['node_guid'][-6:], 16):010d}"), _mlx("Transfer Distance [m]", 2),
           _mlx("FW Version", "N/A"), _mlx("Module State", "Ready state" if up else "N/A"), "",
           "Physical Counters and BER Info", "------------------------------",
           _mlx("Time Since Last Clear [Min]", "1440.0"),
           _mlx("Effective Physical Errors", phy.get("effective_errors", 0)),
           _mlx("Effective Physical BER", phy.get("effective_ber", MLXLINK_BER_NONE)),
           _mlx("Raw Physical Errors Per Lane", "0,0,0,0"), _mlx("Link Down Counter", phy.get("link_down", 0)),
           _mlx("Link Error Recovery Counter", 0), _mlx("Raw Physical BER", phy.get("raw_ber", "1E-12"))]
    return "\n".join(out) + "\n"


def render_ibstatus(view: Node) -> str:
    """`ibstatus` (corpus ibstat/ibstatus-a100-azure-hdr200-8port)."""
    out: list[str] = []
    for hca in view["hcas"]:
        for port in hca["ports"]:
            out += [f"Infiniband device '{hca['name']}' port {port['port']} status:",
                    f"\tdefault gid:\t {_gid(port['port_guid'])}",
                    f"\tbase lid:\t 0x{port['base_lid']:x}",
                    f"\tsm lid:\t\t 0x{port['sm_lid']:x}",
                    f"\tstate:\t\t {_STATE_NUM[port['state']]}: {port['state'].upper()}",
                    f"\tphys state:\t {_PHYS_NUM[port['phys_state']]}: {port['phys_state']}",
                    f"\trate:\t\t {port_rate_text(port)}",
                    f"\tlink_layer:\t {port['link_layer']}", ""]
    return "\n".join(out) + "\n"


_DEVICE_CAPS = """\tmax_mr_size:\t\t\t0xffffffffffffffff
\tpage_size_cap:\t\t\t0xfffffffffffff000
\tmax_qp:\t\t\t\t131072
\tmax_qp_wr:\t\t\t32768
\tdevice_cap_flags:\t\t0x21361c36
\t\t\t\t\tBAD_PKEY_CNTR
\t\t\t\t\tBAD_QKEY_CNTR
\t\t\t\t\tAUTO_PATH_MIG
\t\t\t\t\tCHANGE_PHY_PORT
\t\t\t\t\tPORT_ACTIVE_EVENT
\t\t\t\t\tSYS_IMAGE_GUID
\t\t\t\t\tRC_RNR_NAK_GEN
\t\t\t\t\tMEM_WINDOW
\t\t\t\t\tUD_IP_CSUM
\t\t\t\t\tXRC
\t\t\t\t\tMEM_MGT_EXTENSIONS
\t\t\t\t\tMEM_WINDOW_TYPE_2B
\t\t\t\t\tMANAGED_FLOW_STEERING
\tmax_sge:\t\t\t30
\tmax_sge_rd:\t\t\t30
\tmax_cq:\t\t\t\t16777216
\tmax_cqe:\t\t\t4194303
\tmax_mr:\t\t\t\t16777216
\tmax_pd:\t\t\t\t8388608
\tmax_qp_rd_atom:\t\t\t16
\tmax_ee_rd_atom:\t\t\t0
\tmax_res_rd_atom:\t\t2097152
\tmax_qp_init_rd_atom:\t\t16
\tmax_ee_init_rd_atom:\t\t0
\tatomic_cap:\t\t\tATOMIC_HCA (1)
\tmax_ee:\t\t\t\t0
\tmax_rdd:\t\t\t0
\tmax_mw:\t\t\t\t16777216
\tmax_raw_ipv6_qp:\t\t0
\tmax_raw_ethy_qp:\t\t0
\tmax_mcast_grp:\t\t\t2097152
\tmax_mcast_qp_attach:\t\t240
\tmax_total_mcast_qp_attach:\t503316480
\tmax_ah:\t\t\t\t2147483647
\tmax_fmr:\t\t\t0
\tmax_srq:\t\t\t8388608
\tmax_srq_wr:\t\t\t32767
\tmax_srq_sge:\t\t\t31
\tmax_pkeys:\t\t\t128
\tlocal_ca_ack_delay:\t\t16
\tgeneral_odp_caps:
\t\t\t\t\tODP_SUPPORT
\t\t\t\t\tODP_SUPPORT_IMPLICIT
\trc_odp_caps:
\t\t\t\t\tSUPPORT_SEND
\t\t\t\t\tSUPPORT_RECV
\t\t\t\t\tSUPPORT_WRITE
\t\t\t\t\tSUPPORT_READ
\t\t\t\t\tSUPPORT_ATOMIC
\t\t\t\t\tSUPPORT_SRQ
\tuc_odp_caps:
\t\t\t\t\tNO SUPPORT
\tud_odp_caps:
\t\t\t\t\tSUPPORT_SEND
\txrc_odp_caps:
\t\t\t\t\tSUPPORT_SEND
\t\t\t\t\tSUPPORT_WRITE
\t\t\t\t\tSUPPORT_READ
\t\t\t\t\tSUPPORT_ATOMIC
\t\t\t\t\tSUPPORT_SRQ
\tcompletion timestamp_mask:\t\t\t0x7fffffffffffffff
\thca_core_clock:\t\t\t156250kHZ
\tdevice_cap_flags_ex:\t\t0x1021361C36
\t\t\t\t\tPCI_WRITE_END_PADDING
\tnum_comp_vectors:\t\t63"""


def render_ibv_devinfo(view: Node, verbose: bool = True, device: str | None = None, port_num: int | None = None) -> str:
    """`ibv_devinfo -v` (layout of corpus ibv_devinfo-vv-cx6-4123-hdr-2port-one-down); without verbose the plain
    `ibv_devinfo` (corpus ibv_devinfo-8x-cx7-dell-*); device/port_num: -d DEV / -i PORT."""
    out: list[str] = []
    for hca in view["hcas"]:
        if device is not None and hca["name"] != device:
            continue
        out += [f"hca_id:\t{hca['name']}", "\ttransport:\t\t\tInfiniBand (0)", f"\tfw_ver:\t\t\t\t{hca['fw']}",
                f"\tnode_guid:\t\t\t{_colon_guid(hca['node_guid'])}",
                f"\tsys_image_guid:\t\t\t{_colon_guid(hca['node_guid'])}", "\tvendor_id:\t\t\t0x02c9",
                f"\tvendor_part_id:\t\t\t{hca['ca_type'][2:]}", "\thw_ver:\t\t\t\t0x0",
                f"\tboard_id:\t\t\t{hca['psid']}", f"\tphys_port_cnt:\t\t\t{len(hca['ports'])}"]
        if verbose:
            out.append(_DEVICE_CAPS)
        for port in hca["ports"]:
            if port_num is not None and port["port"] != port_num:
                continue
            mtu = port["active_mtu"]
            out += [f"\t\tport:\t{port['port']}",
                    f"\t\t\tstate:\t\t\t{_VERBS_STATE[port['state']]} ({_STATE_NUM[port['state']]})",
                    f"\t\t\tmax_mtu:\t\t{port['max_mtu']} ({_MTU_ENUM[port['max_mtu']]})",
                    f"\t\t\tactive_mtu:\t\t{mtu} ({_MTU_ENUM[mtu]})",
                    f"\t\t\tsm_lid:\t\t\t{port['sm_lid']}", f"\t\t\tport_lid:\t\t{port['base_lid']}",
                    "\t\t\tport_lmc:\t\t0x00", f"\t\t\tlink_layer:\t\t{port['link_layer']}"]
            if not verbose:
                continue
            out += ["\t\t\tmax_msg_sz:\t\t0x40000000", "\t\t\tport_cap_flags:\t\t0xa259e848",
                    "\t\t\tport_cap_flags2:\t0x0032", "\t\t\tmax_vl_num:\t\t4 (3)", "\t\t\tbad_pkey_cntr:\t\t0x0",
                    "\t\t\tqkey_viol_cntr:\t\t0x0", "\t\t\tsm_sl:\t\t\t0", "\t\t\tpkey_tbl_len:\t\t128",
                    "\t\t\tgid_tbl_len:\t\t8", "\t\t\tsubnet_timeout:\t\t18", "\t\t\tinit_type_reply:\t0",
                    "\t\t\tactive_width:\t\t4X (2)",
                    f"\t\t\tactive_speed:\t\t{_LANE.get(port['rate'], '25.0 Gbps (32)')}",
                    f"\t\t\tphys_state:\t\t{_VERBS_PHYS.get(port['phys_state'], 'DISABLED')} "
                    f"({_PHYS_NUM[port['phys_state']]})",
                    f"\t\t\tGID[  0]:\t\t{_gid(port['port_guid'])}"]
        out.append("")
    return "\n".join(out) + "\n"


def netdev_up(port: dict[str, Any]) -> bool:
    """A netdev has carrier only when its port is Active."""
    return port["state"] == "Active"


def render_ibdev2netdev(view: Node) -> str:
    """`ibdev2netdev`."""
    return "".join(f"{hca['name']} port {p['port']} ==> {p['netdev']} ({'Up' if netdev_up(p) else 'Down'})\n"
                   for hca in view["hcas"] for p in hca["ports"])


def render_rdma_link(view: Node) -> str:
    """`rdma link show`."""
    out = []
    for hca in view["hcas"]:
        for p in hca["ports"]:
            state = _VERBS_STATE[p["state"]].replace("PORT_", "")
            phys = _VERBS_PHYS.get(p["phys_state"], "DISABLED")
            if p["link_layer"] == "InfiniBand":
                out.append(f"link {hca['name']}/{p['port']} subnet_prefix fe80:0000:0000:0000 lid {p['base_lid']} "
                           f"sm_lid {p['sm_lid']} lmc 0 state {state} physical_state {phys}")
            else:
                out.append(f"link {hca['name']}/{p['port']} state {state} physical_state {phys} netdev {p['netdev']}")
    return "\n".join(out) + "\n"


def _ipv4_gid(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def gid_table(view: Node) -> list[tuple[str, int, int, str, str, str, str]]:
    """(dev, port, index, gid, ipv4, version, netdev) rows show_gids prints."""
    rows = []
    for hca in view["hcas"]:
        for p in hca["ports"]:
            if p["link_layer"] == "InfiniBand":
                rows.append((hca["name"], p["port"], 0, _gid(p["port_guid"]), "", "v1", ""))
                continue
            ll = "fe80:0000:0000:0000:" + _colon_guid(p["port_guid"][:6] + "fffe" + p["port_guid"][10:])
            rows += [(hca["name"], p["port"], 0, ll, "", "v1", p["netdev"]),
                     (hca["name"], p["port"], 1, ll, "", "v2", p["netdev"])]
            if p["ipv4"]:
                rows += [(hca["name"], p["port"], 2, _ipv4_gid(p["ipv4"]), p["ipv4"], "v1", p["netdev"]),
                         (hca["name"], p["port"], 3, _ipv4_gid(p["ipv4"]), p["ipv4"], "v2", p["netdev"])]
    return rows


def render_show_gids(view: Node) -> str:
    """`show_gids` (TAB-separated, as the MLNX_OFED script prints it)."""
    out = ["DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV", "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---"]
    rows = gid_table(view)
    for dev, port, index, gid, ip, ver, nd in rows:
        ipcol = f"{ip}  \t" if ip else "\t\t"
        out.append(f"{dev}\t{port}\t{index}\t{gid}\t{ipcol}{ver}\t{nd}")
    out.append(f"n_gids_found={len(rows)}")
    return "\n".join(out) + "\n"


def render_ofed_info(view: Node) -> str:
    """`ofed_info -s` (the version followed by a colon)."""
    return f"{profile_of(view)['ofed']}:\n"


def _flash_fw(hca: dict[str, Any]) -> str:
    """The image in flash: a burned but not yet activated image, else the running one."""
    return hca["fw_pending"] or hca["fw"]


def render_mlxfwmanager(view: Node) -> str:
    """`mlxfwmanager --query` (corpus mlxup-d-cx7 ... 'FW (Running)' row when flash and running differ)."""
    out = ["Querying Mellanox devices firmware ...", ""]
    for n, hca in enumerate(view["hcas"], start=1):
        out += [f"Device #{n}:", "----------", "",
                f"  Device Type:      {hca['device_type']}",
                f"  Part Number:      {hca['part_number']}",
                f"  Description:      {hca['description']}",
                f"  PSID:             {hca['psid']}",
                f"  PCI Device Name:  {hca['bdf']}",
                f"  Base GUID:        {hca['node_guid']}",
                f"  Base MAC:         {_mac(hca['node_guid'])}",
                "  Versions:         Current        Available     ",
                f"     FW             {_flash_fw(hca):<15}N/A           "]
        if hca["fw_pending"] and hca["fw_pending"] != hca["fw"]:
            out.append(f"     FW (Running)   {hca['fw']:<15}N/A           ")
        out += [f"     PXE            {hca['pxe']:<15}N/A           ",
                f"     UEFI           {hca['uefi']:<15}N/A           ", "",
                "  Status:           No matching image found", ""]
    return "\n".join(out)


def _rom_version(v: str) -> str:
    """'14.34.0012' -> '14.34.12' (flint prints ROM versions without zero padding)."""
    return ".".join(str(int(x)) for x in v.split("."))


def render_flint_q(view: Node, hca: dict[str, Any]) -> str:
    """`flint -d <dev> q` (corpus flint/cx7-mcx715105as-...-secure-fw-flint-query)."""
    fw = _flash_fw(hca)
    lines = [("Image type:", "FS4"), ("FW Version:", fw)]
    if hca["fw_pending"] and hca["fw_pending"] != hca["fw"]:
        lines.append(("FW Version(Running):", hca["fw"]))
    minor = int(fw.split(".")[1])
    lines += [("FW Release Date:", f"{1 + minor % 28}.{1 + minor % 12}.{2000 + 20 + minor // 10}"),
              ("Product Version:", fw),
              ("Rom Info:", f"type=UEFI version={_rom_version(hca['uefi'])} cpu=AMD64,AARCH64"),
              ("", f"type=PXE version={_rom_version(hca['pxe'])} cpu=AMD64"),
              ("Description:", "UID                GuidsNumber"),
              ("Base GUID:", f"{hca['node_guid']}        16"),
              ("Base MAC:", f"{_mac(hca['node_guid'])}            16"),
              ("Image VSD:", "N/A"), ("Device VSD:", "N/A"), ("PSID:", hca["psid"]),
              ("Security Attributes:", "secure-fw")]
    return "".join(f"{k:<23}{v}\n" for k, v in lines)


def lspci_mellanox(view: Node) -> str:
    """`lspci -D -d 15b3:` (what the flint collector script uses to find the first adapter)."""
    out = []
    for hca in view["hcas"]:
        cls = "Infiniband controller" if hca["ports"][0]["link_layer"] == "InfiniBand" else "Ethernet controller"
        name = hca["lspci_name"].replace("Mellanox Technologies ", "")
        out.append(f"{hca['bdf']} {cls}: Mellanox Technologies {name}")
    return "\n".join(out) + "\n"


IB_COUNTER_NAMES = ("excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
                    "local_link_integrity_errors", "port_rcv_constraint_errors", "port_rcv_data", "port_rcv_errors",
                    "port_rcv_packets", "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
                    "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards", "port_xmit_packets",
                    "port_xmit_wait", "symbol_error", "VL15_dropped")
# `perfquery` (classic PortCounters) in the order and dotted layout of the corpus sample (ib-diag perfquery-C-*),
# from the port's sysfs counters.
_PERFQUERY = (("PortSelect", None), ("CounterSelect", None), ("SymbolErrorCounter", "symbol_error"),
              ("LinkErrorRecoveryCounter", "link_error_recovery"), ("LinkDownedCounter", "link_downed"),
              ("PortRcvErrors", "port_rcv_errors"), ("PortRcvRemotePhysicalErrors", "port_rcv_remote_physical_errors"),
              ("PortRcvSwitchRelayErrors", "port_rcv_switch_relay_errors"), ("PortXmitDiscards", "port_xmit_discards"),
              ("PortXmitConstraintErrors", "port_xmit_constraint_errors"),
              ("PortRcvConstraintErrors", "port_rcv_constraint_errors"), ("CounterSelect2", None),
              ("LocalLinkIntegrityErrors", "local_link_integrity_errors"),
              ("ExcessiveBufferOverrunErrors", "excessive_buffer_overrun_errors"), ("QP1Dropped", None),
              ("VL15Dropped", "VL15_dropped"), ("PortXmitData", "port_xmit_data"), ("PortRcvData", "port_rcv_data"),
              ("PortXmitPkts", "port_xmit_packets"), ("PortRcvPkts", "port_rcv_packets"),
              ("PortXmitWait", "port_xmit_wait"))


def render_perfquery(view: Node) -> str:
    """`perfquery`: the PortCounters of the first InfiniBand port (the local CA's port 1)."""
    port = next(p for h in view["hcas"] for p in h["ports"] if p["link_layer"] == "InfiniBand")
    counters = port["counters"]
    select = {"PortSelect": "1", "CounterSelect": "0x0000", "CounterSelect2": "0x00"}
    lines = [f"# Port counters: Lid {port['base_lid']} port 1 (CapMask: 0x5300)"]
    for name, sysfs in _PERFQUERY:
        value = select.get(name, "0") if sysfs is None else str(counters.get(sysfs, 0))
        lines.append(f"{name}:".ljust(33, ".") + value)
    return "\n".join(lines) + "\n"


IB_HW_COUNTER_NAMES = ("duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err", "out_of_buffer",
                       "out_of_sequence", "packet_seq_err", "rnr_nak_retry_err", "roce_adp_retrans",
                       "rx_icrc_encapsulated", "np_cnp_sent", "rp_cnp_handled")


#: Directory (relative to the lab dir) of all-zero counter files shared by every healthy port through a
#: symlink: thousands of identical one-value files would dominate the cost of creating a lab.
ZERO_COUNTERS = "share/sysfs-infiniband-zero/counters"
ZERO_HW_COUNTERS = "share/sysfs-infiniband-zero/hw_counters"


class Link(str):
    """A sysfs entry that is a symlink to a shared directory (value: path relative to the lab dir)."""


def zero_counter_files() -> dict[str, str]:
    """The shared all-zero counter files (relative to the lab dir)."""
    files = {f"{ZERO_COUNTERS}/{n}": "0\n" for n in IB_COUNTER_NAMES}
    files.update({f"{ZERO_HW_COUNTERS}/{n}": "0\n" for n in IB_HW_COUNTER_NAMES})
    return files


#: P_Key table of an IB port: the default partition (full member) and the site's compute partition.
DEFAULT_PKEYS = ("0xffff", "0x8001")
PKEY_SLOTS = 4


def sysfs_files(view: Node) -> dict[str, str]:
    """/sys/class/infiniband/<dev>/... entries (relative paths) for the node's fake root: the attributes the
    collectors read as one-value files; counters as a link to the shared zero set unless a port has errors."""
    files: dict[str, str] = {}
    for hca in view["hcas"]:
        base = f"sys/class/infiniband/{hca['name']}"
        files[f"{base}/fw_ver"] = hca["fw"] + "\n"
        files[f"{base}/board_id"] = hca["psid"] + "\n"
        files[f"{base}/hca_type"] = hca["ca_type"] + "\n"
        files[f"{base}/node_guid"] = _colon_guid(hca["node_guid"]) + "\n"
        # What libibumad reads besides (ibstat, and so the real infiniband-diags ibstat can run over this tree)
        files[f"{base}/node_type"] = "1: CA\n"
        files[f"{base}/hw_rev"] = "0\n"
        files[f"{base}/sys_image_guid"] = _colon_guid(hca["node_guid"]) + "\n"
        for p in hca["ports"]:
            pb = f"{base}/ports/{p['port']}"
            files[f"{pb}/lid"] = f"0x{p['base_lid']:x}\n"
            files[f"{pb}/lid_mask_count"] = "0\n"
            files[f"{pb}/sm_lid"] = f"0x{p['sm_lid']:x}\n"
            files[f"{pb}/sm_sl"] = "0\n"
            files[f"{pb}/cap_mask"] = f"{capability_mask(p)}\n"
            files[f"{pb}/gids/0"] = _gid(p["port_guid"]) + "\n"
            files[f"{pb}/state"] = f"{_STATE_NUM[p['state']]}: {p['state'].upper()}\n"
            files[f"{pb}/phys_state"] = f"{_PHYS_NUM[p['phys_state']]}: {p['phys_state']}\n"
            files[f"{pb}/rate"] = port_rate_text(p) + "\n"
            files[f"{pb}/link_layer"] = p["link_layer"] + "\n"
            # the first slots of the P_Key table (a real port has 128, the unused ones read 0x0000 and the collector
            # drops them); a fixed slot count, so a key a fault takes away reads 0x0000 instead of staying behind
            # A RoCE port has the table too (libibumad reads it; ibstat fails without it); the lab leaves its slots
            # unused (0x0000), so the P_Key facts of an Ethernet port stay empty as before.
            table = list(p.get("pkeys", DEFAULT_PKEYS)) if p["link_layer"] == "InfiniBand" else []
            for i in range(PKEY_SLOTS):
                files[f"{pb}/pkeys/{i}"] = (table[i] if i < len(table) else "0x0000") + "\n"
            counters = p["counters"]
            if any(v for k, v in counters.items() if not k.startswith("hw:")):
                for name in IB_COUNTER_NAMES:
                    files[f"{pb}/counters/{name}"] = f"{counters.get(name, 0)}\n"
            else:
                files[f"{pb}/counters"] = Link(ZERO_COUNTERS)
            if any(v for k, v in counters.items() if k.startswith("hw:")):
                for name in IB_HW_COUNTER_NAMES:
                    files[f"{pb}/hw_counters/{name}"] = f"{counters.get('hw:' + name, 0)}\n"
            else:
                files[f"{pb}/hw_counters"] = Link(ZERO_HW_COUNTERS)
    return files


#: Output key (tools.TOOLS) -> renderer.
RENDERERS: dict[str, Callable[[Node], str]] = {
    "lspci_mellanox": lspci_mellanox, "ibstat": render_ibstat, "ibstatus": render_ibstatus,
    "ibv_devinfo": render_ibv_devinfo, "ibdev2netdev": render_ibdev2netdev, "mlxfwmanager": render_mlxfwmanager,
    "ofed_info": render_ofed_info, "show_gids": render_show_gids, "rdma_link": render_rdma_link,
    "perfquery": render_perfquery,
}
