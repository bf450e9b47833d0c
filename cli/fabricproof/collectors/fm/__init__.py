"""Fabric Manager collectors: one module per FM source (version, unit state, config file, log and journal)."""
