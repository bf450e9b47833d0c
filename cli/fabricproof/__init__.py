"""fabricproof: prove a GPU cluster's fabric against a baseline and change it in gated waves."""

__version__ = "0.1.0"
