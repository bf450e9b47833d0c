"""Xid policy defaults: which Xid codes fail a node, warn, or are ignored, from NVIDIA's Xid catalogue."""

from __future__ import annotations

from collections.abc import Mapping

VERDICTS = ("fail", "warn", "ignore")

# Each Xid's "Resolution Bucket (Immediate Action)" in NVIDIA's Xid catalogue
# (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), as NVIDIA/NVSentinel ships it in
# distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv @ 6f8b0fcfa8e502bdda78fabf96facef729a9285b
# (Xids 1-162). Xid 154 (GPU recovery action changed) has no bucket of its own: gpu.xid_recovery_action judges it.
CATALOG_BUCKETS: Mapping[str, tuple[int, ...]] = {
    "RESET_GPU": (46, 62, 64, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158, 162),
    "RESTART_BM": (79, 160),
    "RESTART_VM": (151,),
    "WORKFLOW_XID_48": (48,),
    "WORKFLOW_NVLINK_ERR": (74,),
    "WORKFLOW_NVLINK5_ERR": (144, 145, 146, 147, 148, 149, 150),
    "CHECK_MECHANICALS": (54,),
    "WORKFLOW_XID_45": (45,),
    "UPDATE_SWFW": (78,),
    "CHECK_UVM": (159,),
    "UNEXPECTED_ERR_REPORT_ISSUE": (1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 26, 27,
        28, 29, 30, 33, 34, 35, 36, 42, 47, 49, 50, 51, 52, 53, 55, 56, 57, 58, 59, 61, 65, 73, 81, 87, 90, 91,
        108, 111, 112, 113, 114, 115, 116, 117, 118, 122, 123, 124, 125, 138, 142),
    "RESTART_APP": (8, 11, 13, 25, 31, 32, 39, 40, 41, 60, 68, 69, 70, 71, 72, 75, 76, 77, 80, 82, 83, 84, 85, 86,
        88, 89, 94, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135,
        139),
    "IGNORE": (14, 37, 38, 43, 44, 63, 66, 67, 92, 93, 106, 107, 121, 137, 141, 152, 153, 157, 161),
}

# A bucket's verdict: the GPU or node needs an action (reset, reboot, an NVLink/ECC workflow, mechanicals) fails it;
# "unexpected, report it", firmware/software updates and UVM checks warn; application-level faults (restart the
# app: the node is fine) and the catalogue's IGNORE are ignored.
BUCKET_VERDICTS: Mapping[str, str] = {
    "RESET_GPU": "fail", "RESTART_BM": "fail", "RESTART_VM": "fail", "WORKFLOW_XID_48": "fail",
    "WORKFLOW_NVLINK_ERR": "fail", "WORKFLOW_NVLINK5_ERR": "fail", "CHECK_MECHANICALS": "fail",
    "WORKFLOW_XID_45": "warn", "UPDATE_SWFW": "warn", "CHECK_UVM": "warn", "UNEXPECTED_ERR_REPORT_ISSUE": "warn",
    "RESTART_APP": "ignore", "IGNORE": "ignore",
}
_RECOVERY_ACTION_XID = 154


def default_policy() -> dict[str, list[int]]:
    """The baseline's gpu.xid_policy defaults: {fail: [...], warn: [...], ignore: [...]}, codes sorted."""
    policy: dict[str, list[int]] = {v: [] for v in VERDICTS}
    for bucket, codes in CATALOG_BUCKETS.items():
        policy[BUCKET_VERDICTS[bucket]].extend(codes)
    policy["ignore"].append(_RECOVERY_ACTION_XID)
    return {v: sorted(codes) for v, codes in policy.items()}
