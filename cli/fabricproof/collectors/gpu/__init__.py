"""GPU collectors: one module per tool that reads GPU inventory and driver facts."""
