"""NVLink collectors: one module per `nvidia-smi nvlink` sub-command."""
