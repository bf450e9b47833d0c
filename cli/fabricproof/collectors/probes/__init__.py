"""Probes: collectors that load the fabric (nccl-tests, nvbandwidth, perftest, dcgmi), never in the default set."""

from .spec import PROBES, Layout, Probe

__all__ = ["PROBES", "Layout", "Probe"]
