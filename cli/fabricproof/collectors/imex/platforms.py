"""Where IMEX runs: the platforms whose compute trays join an IMEX domain."""

IMEX_PLATFORMS = ("gb200",)
