"""Ranks that disagree, or pass bad input on one rank, get an error on every rank.

Prints ``ok <case>`` per case where this rank raised as expected.
"""

import numpy as np
from mpi4py import MPI

from collectives import RankError, SparseVector, allgather, allreduce, check

comm = MPI.COMM_WORLD
rank = comm.rank


def expect(case, fragment, call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
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
    "algorithm" if rank == 1 else "rank 1 failed: ValueError: algorithm must be",
    lambda: allreduce(vector(10), comm, algorithm=bad),
)
expect(
    "bad input",
    "vec must be" if rank == 1 else "rank 1 failed: TypeError: vec must be",
    lambda: allreduce([1.0, 2.0] if rank == 1 else vector(10), comm),
)
expect("allgather size", "disagree on size", lambda: allgather(vector(10 + (rank == 1)), comm))


def fail_on_rank1():
    if rank == 1:
        check(KeyError("row 7 is malformed"))
    allreduce(vector(10), comm)  # the others meet rank 1's failure here


expect(
    "failure",
    "row 7" if rank == 1 else "rank 1 failed: KeyError: 'row 7 is malformed'",
    fail_on_rank1,
)
check(None)
try:
    check(None if rank else OSError("disk full"))
except (OSError, RankError) as exc:
    print("ok check", isinstance(exc, RankError) == (rank != 0), flush=True)
# after all that, the communicator still works
total = allreduce(vector(10), comm, out="dense")
print("ok after", total[0] == comm.size, flush=True)
