"""Kernel collectors: one module per source of kernel facts (kernel log, loaded modules, boot command line)."""
