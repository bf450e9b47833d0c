"""Probe parsers: the outputs of the tools that load the fabric (nccl-tests, nvbandwidth, perftest, dcgmi)."""
