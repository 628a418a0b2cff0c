"""Each rank fits its block of rows with every default; rank 0 prints a JSON line a fit.

Arguments: the losses (comma-separated), then data sets, each ``url-like`` (seeded
generated rows, the last 10,000 for testing) or ``TRAIN,TEST`` (LIBSVM files, e.g.
``a9a,a9a.t``). For each data set, loss and seed (0, 1, 2), rank 0 prints the epochs the
fit ran (``n_iter_``), its accuracy on the test rows, which every rank holds whole, the
steps of an epoch and each epoch's local steps between exchanges.
"""

import json
import sys
import warnings
from pathlib import Path

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_svmlight_file

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.backends.pool import row_blocks
from sparcml_apps.datasets import make_url_like


def rows(spec):
    if spec == "url-like":
        X, y = make_url_like(110_000, 200_000, 60, random_state=0)
        return (X[:100_000], y[:100_000]), (X[100_000:], y[100_000:])
    train, test = spec.split(",")
    return tuple(load_svmlight_file(path, n_features=123) for path in (train, test))


comm = MPI.COMM_WORLD
losses, *sets = sys.argv[1:]
for spec in sets:
    (X, y), (X_test, y_test) = rows(spec)
    bounds = row_blocks(X.shape[0], comm.size)
    mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
    for loss in losses.split(","):
        for seed in range(3):
            model = SparseSGDClassifier(loss=loss, random_state=seed, comm=comm)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no fit may stop at max_iter
                model.fit(X[mine], y[mine])
            accuracy = float(np.mean(model.predict(X_test) == y_test))
            if comm.rank == 0:
                name = Path(spec.split(",")[0]).name
                record = dict(data=name, loss=loss, seed=seed, epochs=model.n_iter_,
                              accuracy=accuracy, steps=model.comm_stats_[0]["steps"],
                              periods=[r["local_steps"] for r in model.comm_stats_])  # fmt: skip
                print(json.dumps(record), flush=True)
