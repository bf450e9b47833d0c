"""The GPU platforms fabricproof knows, and how a GPU's name maps to one: the one list baselines, checks and collectors name."""

from __future__ import annotations

PLATFORMS = ("a100", "h100", "h200", "b200", "gb200")

# Substring of nvidia-smi's GPU name -> platform. Most specific first: "GB200" contains "B200".
# GB300 has no platform of its own yet: it is judged by GB200's baselines and checks.
_GPU_NAMES = (("GB200", "gb200"), ("GB300", "gb200"), ("B200", "b200"), ("H200", "h200"), ("H100", "h100"),
              ("A100", "a100"))


def platform_of(gpu_name: str) -> str | None:
    """The platform of a GPU by its nvidia-smi name, e.g. 'NVIDIA H100 80GB HBM3' -> 'h100'; None if unknown."""
    for needle, platform in _GPU_NAMES:
        if needle in gpu_name.upper():
            return platform
    return None
