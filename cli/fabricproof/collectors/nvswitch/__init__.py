"""NVSwitch collectors: one module per tool (NVSwitch PCI functions, HGX firmware inventory)."""
