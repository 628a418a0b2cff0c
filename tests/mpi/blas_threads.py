"""Each rank lets its BLAS and OpenMP pools use two threads (as in a job that ``mpiexec``
alone starts, where a pool takes a thread for every core), then fits on its share of the
rows. Prints, as JSON, the most threads of any of its pools before the fit, after each
epoch (seen by the callback) and after the fit."""

import json

from mpi4py import MPI
from threadpoolctl import threadpool_info, threadpool_limits

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.datasets import make_url_like


def threads():
    return max(pool["num_threads"] for pool in threadpool_info())


threadpool_limits(limits=2)
comm = MPI.COMM_WORLD
X, y = make_url_like(2000, 1000, 20, random_state=0)
mine = slice(comm.rank * 2000 // comm.size, (comm.rank + 1) * 2000 // comm.size)
before, seen = threads(), []
model = SparseSGDClassifier(
    comm=comm, max_iter=2, tol=None, callback=lambda model, record: seen.append(threads())
)
model.fit(X[mine], y[mine])
print(json.dumps({"before": before, "during": seen, "after": threads()}))
