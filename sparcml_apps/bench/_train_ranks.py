"""The ranks' side of the training benchmark: ``mpiexec -n P python -m`` this module.

Every rank makes the same seeded url-like data, fits on its contiguous block of the
training rows with ``comm=COMM_WORLD``; rank 0 prints one JSON record.
"""

import argparse
import json
import time

from mpi4py import MPI

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.bench.train import url_like_split
from sparcml_apps.spawn import row_blocks


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--test-rows", type=int, required=True)
    parser.add_argument("--features", type=int, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--loss", required=True)
    parser.add_argument("--overlap", action="store_true")
    parser.add_argument("--quantization-bits", type=int, default=None)
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    X, y, Xt, yt = url_like_split(args.rows, args.test_rows, args.features)
    bounds = row_blocks(X.shape[0], comm.size)
    mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
    X_mine, y_mine = X[mine], y[mine]
    # load the compiled kernels before the clock starts
    SparseSGDClassifier(max_iter=1, tol=None, comm=comm).fit(X_mine[:64], y_mine[:64])
    model = SparseSGDClassifier(
        loss=args.loss, batch_size=args.batch_size, max_iter=args.epochs, tol=None,
        random_state=0, comm=comm, overlap=args.overlap,
        quantization_bits=args.quantization_bits,
    )  # fmt: skip
    comm.Barrier()
    begin = time.perf_counter()
    model.fit(X_mine, y_mine)
    seconds = comm.allreduce(time.perf_counter() - begin, MPI.MAX)
    sent = sum(record["allreduce_bytes_sent"] for record in model.comm_stats_)
    dense = sum(record["dense_bytes"] for record in model.comm_stats_)
    sent = comm.allreduce(sent, MPI.MAX)
    if comm.rank == 0:
        record = {
            "nprocs": comm.size,
            "batch_size": args.batch_size,
            "seconds": seconds,
            "rows_per_second": args.epochs * X.shape[0] / seconds,
            "accuracy": model.score(Xt, yt),
            "bytes_sent_per_rank": sent,
            "dense_bytes_per_rank": dense,
            "epoch_losses": [record["loss"] for record in model.comm_stats_],
            "overlap": args.overlap,
            "quantization_bits": args.quantization_bits,
        }
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
