"""The rows early stopping holds out, for the same data on any number of ranks (each rank
a contiguous block). Rank 0 prints JSON: the numbers of the rows held out of 103 rows of
three classes, and the training rows of a fit with early stopping on 12 rows."""

import json

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.backends.pool import row_blocks
from sparcml_apps.training import holdout

comm = MPI.COMM_WORLD
labels = np.random.default_rng(0).choice(3, size=103, p=[0.5, 0.3, 0.2])
bounds = row_blocks(labels.size, comm.size)
mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
held = np.flatnonzero(holdout.held_out(labels[mine], 3, 0.25, 7, comm)) + bounds[comm.rank]
held = sorted(int(row) for rows in comm.allgather(held) for row in rows)

X, y = make_classification(n_samples=12, n_features=5, random_state=0)
bounds = row_blocks(12, comm.size)
mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
model = SparseSGDClassifier(comm=comm, early_stopping=True, max_iter=3, tol=None)
model.fit(X[mine], y[mine])
if comm.rank == 0:
    print(json.dumps({"held": held, "rows": model.comm_stats_[0]["rows"]}))
