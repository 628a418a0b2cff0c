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


def local_vector(size, density, dtype, rank):
    """``density * size`` random distinct indices with normal values, seeded by rank."""
    rng = np.random.default_rng([rank, size, int(density * 1e6)])
    nnz = int(round(density * size))
    indices = np.sort(rng.choice(size, nnz, replace=False))
    return SparseVector(indices, rng.standard_normal(nnz).astype(dtype), size)


def timed(comm, call, repeat):
    """Median and least over ``repeat`` runs of the slowest rank's time (after a warm-up)."""
    call()
    times = []
    for _ in range(repeat):
        comm.Barrier()
        begin = time.perf_counter()
        call()
        times.append(comm.allreduce(time.perf_counter() - begin, MPI.MAX))
    return float(np.median(times)), float(np.min(times))


def measure(comm, size, density, dtype, algorithms, repeat):
    vec = local_vector(size, density, dtype, comm.rank)
    dense = vec.to_dense()
    max_nnz = comm.allreduce(vec.nnz, MPI.MAX)
    constants = {k: v for k, v in (cost_model.stored(comm.size) or {}).items() if v is not None}
    records = []
    for name in [BASELINE, *algorithms]:
        stats = Stats()
        if name == BASELINE:
            result = np.empty_like(dense)

            def call(result=result):
                comm.Allreduce(dense, result)

            chosen = BASELINE
            sent = 2 * (comm.size - 1) * dense.nbytes / comm.size
        else:
            allreduce(vec, comm, algorithm=name, stats=stats)
            chosen, sent = stats.algorithm, stats.bytes_sent

            def call(name=name):
                allreduce(vec, comm, algorithm=name)

        seconds, best = timed(comm, call, repeat)
        model = (
            cost_model.predict(
                chosen,
                comm.size,
                size,
                max_nnz,
                value_itemsize=np.dtype(dtype).itemsize,
                index_itemsize=vec.indices.itemsize,
                **constants,
            )
            if chosen != BASELINE
            else None
        )
        records.append(
            {
                "nprocs": comm.size,
                "size": size,
                "density": density,
                "dtype": np.dtype(dtype).name,
                "algorithm": name,
                "chosen": chosen,
                "seconds": seconds,
                "best_seconds": best,
                "bytes_sent_per_rank": comm.allreduce(sent, MPI.MAX),
                "model_bytes_sent": model.bytes_sent if model else sent,
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
