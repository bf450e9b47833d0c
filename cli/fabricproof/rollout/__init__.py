"""Staged rollouts: plans and waves, gates and soak, the executor, its state, decisions and locks."""
