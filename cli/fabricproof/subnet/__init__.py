"""The InfiniBand fabric between nodes: its model, its cabling plan and the diff of one against the other."""
