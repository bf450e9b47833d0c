"""Where the fabric-scope tests find their real outputs: the shared corpus's ib-fabric family and corpus-extra's."""

from __future__ import annotations

from pathlib import Path

from fabricproof.subnet.model import Subnet

TESTS = Path(__file__).resolve().parents[2]
CORPUS = TESTS.parent.parent / "shared" / "corpus"
EXTRA = TESTS / "corpus-extra" / "ib-fabric"
SAMPLES = Path(__file__).resolve().parent / "samples"
#: the real outputs of one ibsim + opensm fabric (samples/ibsim-mini.net), made by samples/ibsim-outputs.sh
SIM = {
    "ibnetdiscover": "ibnetdiscover-ibsim-opensm-3sw-8ca-1rt-aggregation-loopback-1x-edr.txt",
    "ibnetdiscover_p": "ibnetdiscover-p-ibsim-opensm-ports-report-same-fabric-17-idle-ports.txt",
    "iblinkinfo": "iblinkinfo-ibsim-opensm-same-fabric-could-be-12x-every-port-router.txt",
    "ibqueryerrors": "ibqueryerrors-ibsim-opensm-same-fabric-performanceset-symbol-65535-linkdowned-rcverrors.txt",
    "sminfo_fabric": "sminfo-2-1-ibsim-opensm-same-fabric-master-with-ibwarn-line.txt",
}


def corpus(name: str) -> str:
    """A shared-corpus file as stored (newline="" keeps CRLF, so line numbers are the file's)."""
    with open(CORPUS / name, encoding="utf-8", newline="") as f:
        return f.read()


def sim(key: str) -> str:
    return (EXTRA / SIM[key]).read_text(encoding="utf-8")


def kinds(sub: Subnet) -> tuple[int, int, int]:
    """(switches, CAs, routers)."""
    count = {"switch": 0, "ca": 0, "router": 0}
    for node in sub.nodes.values():
        count[node.kind] += 1
    return count["switch"], count["ca"], count["router"]


def roundtrip(sub: Subnet) -> Subnet:
    return Subnet.from_dict(sub.to_dict())
