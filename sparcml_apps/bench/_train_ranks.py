"""The ranks' side of the training benchmarks: ``mpiexec -n P python -m`` this module.

Every rank loads its share of the training and test rows (a dataset, or the seeded
url-like data), then, for each method of ``--methods`` (a JSON list of ``{"name",
"options"}``; ``options`` are estimator parameters, or ``{"sklearn": true}`` for
scikit-learn's ``SGDClassifier`` on one rank), fits a fresh model ``partial_fit`` by
``partial_fit``: each epoch in ``--parts`` parts, each part a fit over the next block of
the rank's rows (shuffled within it). A part is timed from a barrier to the slowest rank's
end; between parts, off the clock, the ranks score their test rows together. A method
stops after ``--epochs`` epochs, or after the part that passes ``--max-seconds``. Rank 0
prints one JSON record a method.
"""

import argparse
import json
import time

import numpy as np
from mpi4py import MPI
from sklearn.linear_model import SGDClassifier

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.backends.pool import row_blocks
from sparcml_apps.datasets import Source


def margin_loss(loss, margins):
    """The loss of each margin ``y * f(x)``: logistic, or hinge for every other loss."""
    if loss == "log_loss":
        return np.logaddexp(0.0, -margins)
    return np.maximum(0.0, 1.0 - margins)


def _sums(comm, values):
    values = np.asarray(values, np.float64)
    total = np.empty_like(values)
    comm.Allreduce(values, total, op=MPI.SUM)
    return total


def _largest(comm, value):
    out = np.empty(1)
    comm.Allreduce(np.array([float(value)]), out, op=MPI.MAX)
    return float(out[0])


def _model(method, args, comm):
    options = dict(method["options"])
    if options.pop("sklearn", False):
        if comm.Get_size() != 1:
            raise ValueError("scikit-learn's SGDClassifier runs on one rank only")
        # a RandomState: each partial_fit shuffles anew, as the epochs of one fit do
        return SGDClassifier(
            loss=args.loss, max_iter=1, tol=None, random_state=np.random.RandomState(0)
        )
    return SparseSGDClassifier(
        loss=args.loss, batch_size=args.batch_size, tol=None, random_state=0, comm=comm,
        **options,
    )  # fmt: skip


def run_method(method, args, comm, train, test, classes):
    """Fit ``method`` part by part; its record (the same on every rank)."""
    X, y = train
    Xt, yt = test
    warm = _model(method, args, comm)  # load the compiled kernels before the clock starts
    warm.partial_fit(X[:64], y[:64], classes=classes)
    model = _model(method, args, comm)
    bounds = row_blocks(X.shape[0], args.parts)
    parts = [(X[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    points, seconds, sent, dense = [], 0.0, 0, 0
    while len(points) < args.epochs * args.parts and seconds <= args.max_seconds:
        X_part, y_part = parts[len(points) % args.parts]
        comm.Barrier()
        begin = time.perf_counter()
        model.partial_fit(X_part, y_part, classes=classes)
        seconds += _largest(comm, time.perf_counter() - begin)
        stats = getattr(model, "comm_stats_", [{}])[-1]
        sent += _largest(comm, stats.get("allreduce_bytes_sent", 0))
        dense += stats.get("dense_bytes", 0)
        margins = model.decision_function(Xt) * yt if Xt.shape[0] else np.empty(0)
        lost, correct, rows = _sums(
            comm, [margin_loss(args.loss, margins).sum(), np.sum(margins > 0), margins.size]
        )
        point = {
            "epoch": (len(points) + 1) / args.parts,
            "seconds": seconds,
            "bytes_sent": int(sent),
            "dense_bytes": int(dense),
            "train_loss": stats.get("loss"),
            "test_loss": lost / rows,
            "accuracy": correct / rows,
        }
        point.update({key: stats[key] for key in ("gamma", "xi") if stats.get(key) is not None})
        points.append(point)
    return {
        "method": method["name"],
        "options": method["options"],
        "nprocs": comm.Get_size(),
        "batch_size": args.batch_size,
        "rows": int(_sums(comm, [X.shape[0]])[0]),
        "epochs": points,
        "capped": len(points) < args.epochs * args.parts,
    }


def _split(args, rank, size):
    """This rank's share of the train and test rows; with a held-out test part, the same
    rows are held out whatever the number of ranks."""
    common = {"rows": args.rows, "features": args.features, "n_features": args.n_features}
    if args.test is not None:
        source = Source(args.dataset, **common)
        test = Source(args.test, **{**common, "n_features": source.width()})
        return source.load(rank, size), test.load(rank, size)
    X, y = Source(args.dataset, **common).load(0, 1)
    cut = X.shape[0] - int(round(args.test_fraction * X.shape[0]))
    shares = []
    for part in (slice(None, cut), slice(cut, None)):
        Xp, yp = X[part], y[part]
        start, stop = row_blocks(Xp.shape[0], size)[rank : rank + 2]
        shares.append((Xp[start:stop], yp[start:stop]))
    return shares


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default=None, help="train rows; default url-like")
    parser.add_argument("--test", default=None, help="test rows; default a held-out part")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--rows", type=int, default=150_000, help="url-like rows, train and test")
    parser.add_argument("--features", type=int, default=3_231_961)
    parser.add_argument("--n-features", type=int, default=None, help="columns of a file")
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--parts", type=int, default=1, help="fits (and scores) an epoch")
    parser.add_argument("--max-seconds", type=float, default=float("inf"))
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--loss", required=True)
    parser.add_argument("--methods", type=json.loads, required=True)
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    train, test = _split(args, rank, size)
    classes = np.unique(np.concatenate(comm.allgather(np.unique(train[1]))))
    for method in args.methods:
        record = run_method(method, args, comm, train, test, classes)
        if rank == 0:
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
