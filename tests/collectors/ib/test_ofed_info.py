"""ofed_info -s parser against real outputs (MLNX_OFED and DOCA-OFED)."""

from __future__ import annotations

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.ib.ofed_info import OFED_SCHEMA, parse_ofed_info

from ..contract import assert_valid


# --- ofed_info -s ----------------------------------------------------------------------------------------------------

# Real outputs found through the code index (sources named in collectors/ib/ofed_info.py next to the pattern).
@pytest.mark.parametrize(
    ("line", "flavor", "release", "doca"),
    [
        ("MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "MLNX_OFED_LINUX", "23.10-1.1.9.0", False),
        ("OFED-internal-24.10-1.1.4.0.200:\n", "OFED-internal", "24.10-1.1.4.0.200", True),
        ("OFED-internal-25.10-1.7.1:\r\n", "OFED-internal", "25.10-1.7.1", True),
    ],
)
def test_ofed_info_versions(line: str, flavor: str, release: str, doca: bool) -> None:
    fragment = parse_ofed_info(line)
    assert_valid(OFED_SCHEMA, fragment)
    assert fragment == {"version": line.strip().rstrip(":"), "flavor": flavor, "release": release, "doca": doca}
    assert fragment["doca"] is doca


def test_ofed_info_garbage() -> None:
    for text in ("", "bash: ofed_info: command not found\n", "hello-world\n"):
        with pytest.raises(ParseError):
            parse_ofed_info(text)
