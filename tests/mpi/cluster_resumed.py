"""A Dask fit (this job is the cluster: scheduler, client, two workers) with checkpoints.

Arguments: DIR MODE, as in fit_resumed.py: "killed" (the second worker kills itself at
the end of epoch 3 of 5), "resume" (then the same fit never stopped, with checkpoints in
DIR-never). The client prints a JSON line: the sha256 of the resumed model and of the one
never stopped, and the epochs.
"""

import hashlib
import json
import os
import signal
import sys

from sparcml_apps import cluster

cluster.initialize()

import dask.array as da  # noqa: E402
from distributed import Client  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from testdata import url_like  # noqa: E402

from sparcml_apps import SparseSGDClassifier  # noqa: E402

folder, mode = sys.argv[1], sys.argv[2]


def die_on_rank1_at_epoch3(estimator, record):
    if estimator.comm.Get_rank() == 1 and record["epoch"] == 3:
        os.kill(os.getpid(), signal.SIGKILL)


client = Client()
X, y = url_like(4000, 20_000)
X, y = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)


def fit(folder, resume, callback=None):
    model = SparseSGDClassifier(
        loss="log_loss",
        max_iter=5,
        tol=None,
        random_state=0,
        checkpoint=folder,
        resume=resume,
        callback=callback,
    )
    return model.fit(X, y)


def digest(model):
    return hashlib.sha256(model.coef_.tobytes() + model.intercept_.tobytes()).hexdigest()


if mode == "killed":
    fit(folder, False, die_on_rank1_at_epoch3)
model = fit(folder, True)
never = fit(folder + "-never", False)
print(json.dumps({"digest": digest(model), "never": digest(never), "n_iter": model.n_iter_}))
client.close()
