"""Ranks that disagree on the dtype of X, a parameter or the classes of partial_fit. Every
rank prints, per case, "case: " and what it raised (or "ok" and the dtype of coef_)."""

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

from sparcml_apps import SparseSGDClassifier

comm = MPI.COMM_WORLD
X, y = make_classification(n_samples=200, n_features=5, random_state=comm.rank)
cases = {
    # rank 1 passes float32, the others float64
    "dtype": lambda: SparseSGDClassifier(comm=comm).fit(
        X.astype(np.float32) if comm.rank == 1 else X, y
    ),
    "batch_size": lambda: SparseSGDClassifier(comm=comm, batch_size=16 + comm.rank % 2).fit(X, y),
    "classes": lambda: SparseSGDClassifier(comm=comm).partial_fit(
        X, y, classes=[0, 1, 2] if comm.rank == 1 else [0, 1]
    ),
    # rank 1 holds no rows, in float64; the others float32: rank 1 follows them
    "empty": lambda: SparseSGDClassifier(comm=comm).fit(
        X[:0] if comm.rank == 1 else X.astype(np.float32), y[:0] if comm.rank == 1 else y
    ),
}
for case, fit in cases.items():
    try:
        model = fit()
    except Exception as exc:  # noqa: BLE001 - printed for the test
        print(f"{case}: {type(exc).__name__}: {exc}", flush=True)
    else:
        print(f"{case}: ok {model.coef_.dtype}", flush=True)
