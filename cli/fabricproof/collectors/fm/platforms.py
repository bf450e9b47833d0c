"""Where Fabric Manager runs: the platforms whose compute nodes manage NVSwitches with FM."""

FM_PLATFORMS = ("a100", "h100", "h200", "b200")  # GB200 compute trays run no FM (NMX on the switch trays does)
