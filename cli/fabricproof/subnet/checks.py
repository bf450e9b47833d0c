"""The subnet.* checks' names: each judges one list of finding sentences under /subnet in every host's facts."""

from __future__ import annotations

#: The check ids after "subnet.", each a key of the /subnet facts.
CHECKS = ("cable_placement", "cable_present", "cable_unplanned", "link_width", "link_speed", "rail_aligned",
          "names_unique", "switch_errors", "sm_master")
#: The facts record the diff fills for every host: the collector id the subnet.* checks name.
COLLECTOR = "subnet"
