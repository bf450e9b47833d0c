"""The lab: an emulated GPU fleet behind a real OpenSSH server on loopback addresses."""
