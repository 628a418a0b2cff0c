"""The ranks' side of the allreduce benchmark: ``mpiexec -n P python -m`` this module.

Prints one JSON record per (size, density, algorithm) on rank 0.
"""

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import collectives
from collectives import SparseVector, Stats, allreduce, cost_model

BASELINE = "mpi_allreduce"  # MPI Allreduce of a vector that is already dense
BUDGET_SECONDS = 0.5  # the rounds of a cell go on (see timed) while they took less


def local_vector(size, density, dtype, rank):
    """``density * size`` random distinct indices with normal values, seeded by rank."""
    rng = np.random.default_rng([rank, size, int(density * 1e6)])
    nnz = int(round(density * size))
    indices = np.sort(rng.choice(size, nnz, replace=False))
    return SparseVector(indices, rng.standard_normal(nnz).astype(dtype), size)


def timed(comm, calls, repeat):
    """Median and least over ``repeat`` rounds or more of the slowest rank's time of each
    call (the times, reduced to their largest, are alike on every rank: so are the rounds).

    After a warm-up of each, a round runs every call once in turn, so that a change in the
    machine's load over the rounds touches every call alike; each round takes them in a
    new order (seeded: alike on every rank), so that no call always follows the same one,
    which leaves it the caches and the memory allocator as that one left them (after the
    dense algorithm frees its large arrays, the next call's arrays are fresh pages that
    fault in: at 2^24 entries, several milliseconds).
    """
    for call in calls:
        call()
    times = [[] for _ in calls]
    round_ = 0
    # quick calls get more rounds, up to ten times as many, for a steadier least time
    while round_ < repeat or (round_ < 10 * repeat and sum(map(sum, times)) < BUDGET_SECONDS):
        for at in np.random.default_rng(round_).permutation(len(calls)):
            comm.Barrier()
            begin = time.perf_counter()
            calls[at]()
            times[at].append(comm.allreduce(time.perf_counter() - begin, MPI.MAX))
        round_ += 1
    return [(float(np.median(taken)), float(np.min(taken))) for taken in times]


def measure(comm, size, density, dtype, algorithms, repeat):
    vec = local_vector(size, density, dtype, comm.rank)
    dense = vec.to_dense()
    max_nnz = comm.allreduce(vec.nnz, MPI.MAX)
    constants = {k: v for k, v in (cost_model.stored(comm.size) or {}).items() if v is not None}
    names = [BASELINE, *algorithms]
    calls, chosen, sent = [], [], []
    for name in names:
        if name == BASELINE:
            result = np.empty_like(dense)

            def call(result=result):
                comm.Allreduce(dense, result)

            calls.append(call)
            chosen.append(BASELINE)
            sent.append(2 * (comm.size - 1) * dense.nbytes / comm.size)
        else:
            stats = Stats()
            allreduce(vec, comm, algorithm=name, stats=stats)
            calls.append(lambda name=name: allreduce(vec, comm, algorithm=name))
            chosen.append(stats.algorithm)
            sent.append(stats.bytes_sent)
    records = []
    for name, algorithm, bytes_sent, (seconds, best) in zip(
        names, chosen, sent, timed(comm, calls, repeat), strict=True
    ):
        model = (
            cost_model.predict(
                algorithm,
                comm.size,
                size,
                max_nnz,
                value_itemsize=np.dtype(dtype).itemsize,
                index_itemsize=vec.indices.itemsize,
                **constants,
            )
            if algorithm != BASELINE
            else None
        )
        records.append(
            {
                "nprocs": comm.size,
                "size": size,
                "density": density,
                "dtype": np.dtype(dtype).name,
                "algorithm": name,
                "chosen": algorithm,
                "seconds": seconds,
                "best_seconds": best,
                "bytes_sent_per_rank": comm.allreduce(bytes_sent, MPI.MAX),
                "model_bytes_sent": model.bytes_sent if model else bytes_sent,
                "model_seconds": model.seconds if model else None,
            }
        )
    base = records[0]["seconds"]
    for record in records:
        record["speedup_vs_dense"] = base / record["seconds"]
    return records


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", required=True)
    parser.add_argument("--densities", type=float, nargs="+", required=True)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--algorithms", nargs="+", default=[*collectives.ALGORITHMS, "auto"])
    parser.add_argument("--wait", default="auto")
    args = parser.parse_args(argv)
    collectives.thresholds.WAIT = args.wait
    comm = MPI.COMM_WORLD
    for size in args.sizes:
        for density in args.densities:
            records = measure(
                comm, size, density, np.dtype(args.dtype), args.algorithms, args.repeat
            )
            if comm.rank == 0:
                for record in records:
                    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
