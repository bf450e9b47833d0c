"""Judging: the check catalog, its operators and pointers, findings, projection, evaluation, baselines and drift."""
