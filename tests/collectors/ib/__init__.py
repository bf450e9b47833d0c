"""InfiniBand / RDMA parser tests: one file per module of collectors/ib (shared corpus helpers in iblib)."""
