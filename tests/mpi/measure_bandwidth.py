"""Rank 0 sends ``MEGABYTES`` to rank 1 a few times; rank 0 prints ``bits_per_second``."""

import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
payload = np.zeros(int(float(sys.argv[1]) * 1e6), np.uint8)
comm.Barrier()
times = []
for _ in range(3):
    comm.Barrier()
    begin = time.perf_counter()
    if comm.rank == 0:
        comm.Send(payload, 1)
        comm.Recv(payload[:1], 1)  # the receiver has it all
    elif comm.rank == 1:
        comm.Recv(payload, 0)
        comm.Send(payload[:1], 0)
    times.append(time.perf_counter() - begin)
if comm.rank == 0:
    print(f"bits_per_second {8 * payload.size / min(times):.6g}", flush=True)
