"""Ranks that disagree, or pass bad input on one rank, get an error on every rank.

Prints ``ok <case>`` per case where this rank raised as expected.
"""

import numpy as np
from mpi4py import MPI

from collectives import SparseVector, allgather, allreduce

comm = MPI.COMM_WORLD
rank = comm.rank


def expect(case, fragment, call):
    try:
        call()
    except (ValueError, TypeError) as exc:
        if fragment in str(exc):
            print("ok", case, "|", exc, flush=True)
        else:
            print("wrong message", case, "|", exc, flush=True)
    else:
        print("no error", case, flush=True)


def vector(size, dtype=np.float64):
    return SparseVector([0], np.ones(1, dtype), size)


for algorithm in (
    "ssar_recursive_double",
    "ssar_split_allgather",
    "dsar_split_allgather",
    "dense",
    "auto",
):
    expect(
        f"size {algorithm}",
        "disagree on size",
        lambda a=algorithm: allreduce(vector(10 + (rank == 1)), comm, algorithm=a),
    )
    expect(
        f"dtype {algorithm}",
        "disagree on dtype",
        lambda a=algorithm: allreduce(
            vector(10, np.float32 if rank == 1 else np.float64), comm, algorithm=a
        ),
    )
expect(
    "algorithm",
    "disagree on algorithm",
    lambda: allreduce(vector(10), comm, algorithm="dense" if rank == 1 else "ssar_split_allgather"),
)
bad = "bogus" if rank == 1 else "auto"
expect(
    "bad algorithm",
    "algorithm" if rank == 1 else "rank 1 passed invalid",
    lambda: allreduce(vector(10), comm, algorithm=bad),
)
expect(
    "bad input",
    "vec must be" if rank == 1 else "rank 1 passed invalid",
    lambda: allreduce([1.0, 2.0] if rank == 1 else vector(10), comm),
)
expect("allgather size", "disagree on size", lambda: allgather(vector(10 + (rank == 1)), comm))
# after all that, the communicator still works
total = allreduce(vector(10), comm, out="dense")
print("ok after", total[0] == comm.size, flush=True)
