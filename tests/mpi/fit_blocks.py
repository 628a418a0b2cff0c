"""Each rank fits on its block (``row_blocks``) of url-like rows; rank 0 prints a digest.

Arguments: rows, n_features, classes (see ``testdata.url_like``), method ("fit";
"partial_fit": two calls; "warm_start": two calls of ``fit`` with ``warm_start=True``),
then estimator parameters as key=value (Python literals).
Rank 0 prints the SHA-256 of ``coef_`` and ``intercept_`` and the number of nonzero
weights. Exits 1 if the ranks' models differ in any bit.
"""

import ast
import hashlib
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testdata import url_like  # noqa: E402

from sparcml_apps import SparseSGDClassifier  # noqa: E402
from sparcml_apps.backends.pool import row_blocks  # noqa: E402

comm = MPI.COMM_WORLD
rows, n_features, classes, method, *options = sys.argv[1:]
params = {key: ast.literal_eval(value) for key, value in (o.split("=", 1) for o in options)}
X, y = url_like(int(rows), int(n_features), int(classes))
bounds = row_blocks(X.shape[0], comm.size)
mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
model = SparseSGDClassifier(comm=comm, **params)
if method == "fit":
    model.fit(X[mine], y[mine])
elif method == "warm_start":
    model.set_params(warm_start=True)
    for _ in range(2):
        model.fit(X[mine], y[mine])
else:
    for _ in range(2):
        model.partial_fit(X[mine], y[mine], classes=np.unique(y))
digest = hashlib.sha256(model.coef_.tobytes() + model.intercept_.tobytes()).hexdigest()
if comm.allgather(digest) != [digest] * comm.size:
    print(f"rank {comm.rank}: the model differs from another rank's", flush=True)
    sys.exit(1)
if comm.rank == 0:
    print(digest, np.count_nonzero(model.coef_), flush=True)
