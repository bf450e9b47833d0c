"""InfiniBand / RDMA collectors: one module per tool that reads the HCAs, their ports and GIDs, firmware and OFED."""
