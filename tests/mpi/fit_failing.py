"""A fit in which one rank fails; every rank prints what it raised.

Arguments: "callback" (rank 1's callback raises at epoch 2) or "data" (rank 2's rows hold
a NaN); then "overlap" to sum each step while the next is computed.
"""

import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from estimator_helpers import fail_on_rank1_at_epoch2  # noqa: E402

from sparcml_apps import SparseSGDClassifier  # noqa: E402

comm = MPI.COMM_WORLD
X, y = make_classification(n_samples=3000, n_features=20, random_state=comm.rank)
callback = None
if sys.argv[1] == "callback":
    callback = fail_on_rank1_at_epoch2
elif comm.rank == 2:
    X[5, 3] = np.nan
try:
    overlap = sys.argv[2:] == ["overlap"]
    SparseSGDClassifier(comm=comm, callback=callback, max_iter=50, tol=None, overlap=overlap).fit(
        X, y
    )
except Exception as exc:  # noqa: BLE001 - the test reads what each rank raised
    print(f"{type(exc).__name__}: {exc}", flush=True)
else:
    print("no error", flush=True)
