"""IMEX collectors (GB200 compute trays): one module per IMEX source (unit state, domain node status)."""
