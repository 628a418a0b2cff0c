"""A Dask fit in which one worker process is killed at epoch 2; the client reports it.

Argument: a file each rank appends its process id to. Run under ``mpiexec
-disable-auto-cleanup`` so that the launcher leaves the other ranks to see the loss.
"""

import os
import signal
import sys

from sparcml_apps import cluster

with open(sys.argv[1], "a") as pids:
    print(os.getpid(), file=pids, flush=True)
cluster.initialize()

import dask.array as da  # noqa: E402
from distributed import Client  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

from sparcml_apps import SparseSGDClassifier  # noqa: E402


def die_on_rank1_at_epoch2(estimator, record):
    if estimator.comm.Get_rank() == 1 and record["epoch"] == 2:
        os.kill(os.getpid(), signal.SIGKILL)


client = Client()
X, y = make_classification(n_samples=4000, n_features=20, random_state=0)
X, y = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
model = SparseSGDClassifier(max_iter=1000, tol=None, callback=die_on_rank1_at_epoch2)
try:
    model.fit(X, y)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}", flush=True)
    raise
