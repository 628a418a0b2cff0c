"""A Dask fit in which the process of the second worker kills itself at epoch 2.

Arguments: a file each process appends its id to, then optionally the scheduler file of
a running cluster (else this job is the cluster: sparcml_apps.cluster.initialize).
"""

import os
import signal
import sys

with open(sys.argv[1], "a") as pids:
    print(os.getpid(), file=pids, flush=True)
if len(sys.argv) < 3:
    from sparcml_apps import cluster

    cluster.initialize()

import dask.array as da  # noqa: E402
from distributed import Client  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

from sparcml_apps import SparseSGDClassifier  # noqa: E402


def die_on_rank1_at_epoch2(estimator, record):
    if estimator.comm.Get_rank() == 1 and record["epoch"] == 2:
        os.kill(os.getpid(), signal.SIGKILL)


client = Client(scheduler_file=sys.argv[2]) if len(sys.argv) > 2 else Client()
X, y = make_classification(n_samples=4000, n_features=20, random_state=0)
X, y = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
model = SparseSGDClassifier(max_iter=1000, tol=None, callback=die_on_rank1_at_epoch2)
try:
    model.fit(X, y)
except Exception as exc:  # noqa: BLE001 - the test reads it
    print(f"{type(exc).__name__}: {exc}", flush=True)
    client.close()
    sys.exit(1)
