"""Probe tests: specs, figures, the idle guard, pairing and the runner (the parsers' tests stay in collectors/probes)."""
