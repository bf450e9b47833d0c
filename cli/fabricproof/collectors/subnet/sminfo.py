"""`sminfo` from the vantage host: the master subnet manager, read by the host collector's parser into Subnet.sms."""

from __future__ import annotations

from ...subnet.model import Subnet, SubnetManager
from ..base import ParseError
from ..ib.sminfo import parse_sminfo
from .words import guid


def parse(text: str) -> Subnet:
    """The SM sminfo reached (the master its port's SM LID points to; standby SMs do not answer it): one
    SubnetManager, or none when no SM answered. An sminfo that could not query at all (no umad port) is a ParseError:
    it proves nothing about the fabric's SM."""
    fact = parse_sminfo(text)
    if fact["master"] is None and fact["guid"] is None:
        raise ParseError(fact["error"] or "sminfo gave no answer")
    if fact["guid"] is None:
        return Subnet()
    return Subnet(sms=[SubnetManager(guid(fact["guid"]), fact["lid"], fact["priority"],
                                     fact["state_name"] or f"state {fact['state']}")])
