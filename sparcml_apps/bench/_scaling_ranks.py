"""The ranks' side of the scaling benchmark: ``mpiexec -n P python -m`` this module.

Every rank takes its contiguous block of the training rows and of the test rows (``.npz``
CSR files the driver wrote, with ``-y.npy`` labels beside them). For each seed it fits
``SparseSGDClassifier`` with default options on ``COMM_WORLD`` for ``--epochs`` epochs
(``tol=None``: no early stop, so the curves are alike in length), scoring the test rows
after every epoch off the clock (the epoch's seconds are the slowest rank's, as the
estimator measures them, without the scoring). With ``--defaults`` it also fits with every
default (``max_iter`` and ``tol`` too) and scores the final model. On one rank, with
``--scikit-learn``, scikit-learn's ``SGDClassifier`` does the same: ``partial_fit`` an
epoch at a time (each call shuffles anew, as the epochs of one fit do), timed, and a fit
with its defaults (``--no-curve``: only the fits with every default). Rank 0 prints one
JSON record a system and seed.
"""

import argparse
import json
import time
import warnings

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.backends.pool import row_blocks
from sparcml_apps.bench._warm import held_out_fit


def load_block(stem, rank, size):
    """Rows ``rank`` of ``size`` contiguous blocks of ``stem.npz`` and ``stem-y.npy``."""
    X = sp.load_npz(f"{stem}.npz").tocsr()
    y = np.load(f"{stem}-y.npy", mmap_mode="r")
    start, stop = row_blocks(X.shape[0], size)[rank : rank + 2]
    return X[start:stop], np.array(y[start:stop])


def _sum(comm, values):
    values = np.asarray(values, np.float64)
    comm.Allreduce(MPI.IN_PLACE, values, op=MPI.SUM)
    return values


def _largest(comm, value):
    out = np.array([float(value)])
    comm.Allreduce(MPI.IN_PLACE, out, op=MPI.MAX)
    return float(out[0])


def accuracy(comm, model, X, y):
    """The test accuracy over every rank's test rows."""
    correct = float(np.sum(model.predict(X) == y)) if X.shape[0] else 0.0
    right, rows = _sum(comm, [correct, X.shape[0]])
    return right / rows


def sparcml_curve(comm, train, test, seed, loss, epochs, alone=False):
    """The points (training seconds so far, test accuracy) after every epoch, with the
    traffic and the period the fit chose. With ``alone`` every rank fits its own rows on
    ``COMM_SELF`` (the seconds are the slowest rank's, the accuracy that of the ranks'
    models, each on its own test rows), and the points are all there is."""
    points, clock = [], [0.0]

    def score(model, record):
        if alone:
            meet(comm)
        clock[0] += _largest(comm, record["seconds"])
        points.append(
            {
                "epoch": record["epoch"],
                "seconds": clock[0],
                "accuracy": accuracy(comm, model, *test),
                "bytes_sent": _largest(comm, record.get("allreduce_bytes_sent", 0)),
            }
        )

    model = SparseSGDClassifier(
        loss=loss, max_iter=epochs, tol=None, random_state=seed,
        comm=MPI.COMM_SELF if alone else comm, callback=score,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(*train)
    if alone:
        return {"points": points}
    first, last = model.comm_stats_[0], model.comm_stats_[-1]
    return {
        "points": points,
        "local_steps": first["local_steps"],  # later epochs' are longer (epoch_period)
        "exchanges_per_epoch": float(np.mean([r["exchanges"] for r in model.comm_stats_])),
        "step_entries": _sum(comm, [last["step_entries"] or 0])[0] / comm.Get_size(),
    }


def meet(comm, nap=0.001):
    """Wait for every rank of ``comm``, napping from the start (not as
    :func:`collectives.wait`, which first yields): a rank that is early leaves its core
    idle, free for a rank still working."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(nap)


def sklearn_curve(train, test, seed, loss, epochs):
    """scikit-learn's points, one ``partial_fit`` an epoch (timed), scored between them."""
    model = SGDClassifier(loss=loss, random_state=np.random.RandomState(seed))
    classes = np.unique(train[1])
    points, clock = [], 0.0
    for epoch in range(1, epochs + 1):
        begin = time.perf_counter()
        model.partial_fit(*train, classes=classes)
        clock += time.perf_counter() - begin
        points.append(
            {
                "epoch": epoch,
                "seconds": clock,
                "accuracy": float(model.score(*test)),
                "bytes_sent": 0,
            }
        )
    return {"points": points}


def defaults_fit(comm, train, test, seed, loss, system):
    """A fit with every default option; its epochs, seconds and test accuracy."""
    if system == "sparcml":
        model = SparseSGDClassifier(loss=loss, random_state=seed, comm=comm)
    else:
        model = SGDClassifier(loss=loss, random_state=seed)
    comm.Barrier()
    begin = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(*train)
    seconds = _largest(comm, time.perf_counter() - begin)
    done = {"epochs": int(model.n_iter_), "seconds": seconds}
    if system == "sparcml":
        done.update(where_time_went(comm, model.comm_stats_))
    return {"defaults": done | {"accuracy": accuracy(comm, model, *test)}}


def where_time_went(comm, history):
    """Of a fit's epochs (its ``comm_stats_``): their seconds (the slowest rank's sum), the
    exchanges, and the seconds the ranks spent in them (their mean; waiting for a slower
    rank counts as the exchange's)."""
    epochs = sum(record["seconds"] for record in history)
    exchanging = sum(record["allreduce_seconds"] for record in history)
    return {
        "epoch_seconds": _largest(comm, epochs),
        "exchanges": int(sum(record["exchanges"] for record in history)),
        "exchange_seconds": float(_sum(comm, [exchanging])[0]) / comm.Get_size(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", required=True, help="stem of the training rows' files")
    parser.add_argument("--test", required=True, help="stem of the test rows' files")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--loss", default="log_loss")
    parser.add_argument("--defaults", action="store_true", help="also fit with every default")
    parser.add_argument("--scikit-learn", action="store_true", help="(one rank) also sklearn")
    parser.add_argument("--alone", action="store_true", help="every rank fits its rows alone")
    parser.add_argument("--no-curve", action="store_true", help="only the default fits")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    train, test = load_block(args.train, rank, size), load_block(args.test, rank, size)
    # the compiled kernels load (on a new machine: compile) before any clock starts: those
    # of fixed epochs, and those of the default fits, which hold rows out where there are
    # enough of them
    SparseSGDClassifier(loss=args.loss, max_iter=1, tol=None, comm=comm).fit(
        train[0][:256], train[1][:256]
    )
    held_out_fit(*train, comm, loss=args.loss)
    systems = ["alone"] if args.alone else ["sparcml"]
    systems += ["scikit-learn"] if args.scikit_learn and size == 1 else []
    for system in systems:
        for seed in args.seeds:
            if args.no_curve:
                record = {}
            elif system in ("sparcml", "alone"):
                alone = system == "alone"
                record = sparcml_curve(comm, train, test, seed, args.loss, args.epochs, alone)
            else:
                record = sklearn_curve(train, test, seed, args.loss, args.epochs)
            if args.defaults:
                record.update(defaults_fit(comm, train, test, seed, args.loss, system))
            record.update(system=system, nprocs=size, seed=seed, loss=args.loss)
            if rank == 0:
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
