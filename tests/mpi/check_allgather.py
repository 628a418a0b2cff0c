"""allgather against a gather of every rank's dense vector; Stats accumulate over calls."""

import sys

import numpy as np
from mpi4py import MPI

from collectives import SparseVector, Stats, allgather, allreduce

comm = MPI.COMM_WORLD
rank, nprocs = comm.rank, comm.size
failures = []
stats = Stats()
for dtype in (np.float32, np.float64):
    for size in (1, 10, 1000):
        rng = np.random.default_rng([rank, size])
        nnz = min(size, rank * 3)  # rank 0 holds nothing; the others hold more and more
        indices = np.sort(rng.choice(size, nnz, replace=False))
        mine = SparseVector(indices, rng.standard_normal(nnz).astype(dtype), size)
        gathered = allgather(mine, comm, stats=stats)
        dense = np.empty((nprocs, size), dtype)
        comm.Allgather(mine.to_dense(), dense)
        if len(gathered) != nprocs:
            failures.append(f"{size} {dtype.__name__}: {len(gathered)} vectors")
            continue
        for owner, vec in enumerate(gathered):
            if vec.nnz != min(size, owner * 3) or vec.dtype != dtype or vec.size != size:
                failures.append(f"{size} {dtype.__name__} rank {owner}: {vec!r}")
            elif not np.array_equal(vec.to_dense(), dense[owner]):
                failures.append(f"{size} {dtype.__name__} rank {owner}: values differ")
calls_before = stats.calls
allreduce(SparseVector([0], [1.0], 4), comm, algorithm="ssar_split_allgather", stats=stats)
if stats.calls != calls_before + 1 or stats.algorithm != "ssar_split_allgather":
    failures.append(f"stats did not accumulate: {stats}")
if nprocs > 1 and not (stats.bytes_sent > 0 and stats.bytes_received > 0 and stats.messages):
    failures.append(f"stats counted no traffic: {stats}")
for line in failures:
    print("FAIL", line)
print("done")
sys.exit(1 if comm.allreduce(len(failures)) else 0)
