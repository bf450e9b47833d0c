"""Collector parser tests against the real-output corpus and documented formats."""
