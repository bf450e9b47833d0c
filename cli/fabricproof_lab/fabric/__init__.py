"""The lab's real InfiniBand fabric: a generated rail-optimised fat tree simulated by ibsim, swept by opensm."""
