"""Probes: how each covers hosts and its argv (spec), the figures and their regression comparison, the idle guard,
the rendezvous, the pairing rounds and the runner; their parsers are collectors (collectors/probes/)."""
