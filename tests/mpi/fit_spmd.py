"""Each rank fits on its contiguous block of a LIBSVM file; rank 0 saves the models.

Arguments: data file, n_features, output .npz, seeds (comma separated), then estimator
parameters as key=value (values parsed as Python literals). Exits 1 if the ranks' models
differ in any bit.
"""

import ast
import sys

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_svmlight_file

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.backends.pool import row_blocks

comm = MPI.COMM_WORLD
path, n_features, output, seeds, *options = sys.argv[1:]
params = {key: ast.literal_eval(value) for key, value in (o.split("=", 1) for o in options)}
X, y = load_svmlight_file(path, n_features=int(n_features))
bounds = row_blocks(X.shape[0], comm.size)
rows = slice(bounds[comm.rank], bounds[comm.rank + 1])
saved = {}
for seed in map(int, seeds.split(",")):
    model = SparseSGDClassifier(comm=comm, random_state=seed, **params).fit(X[rows], y[rows])
    mine = np.concatenate([model.coef_.ravel(), model.intercept_])
    first = comm.bcast(mine, root=0)
    if first.tobytes() != mine.tobytes():
        print(f"rank {comm.rank}: the model of seed {seed} differs from rank 0's", flush=True)
        sys.exit(1)
    saved[f"model_{seed}"] = mine
if comm.rank == 0:
    np.savez(output, **saved)
