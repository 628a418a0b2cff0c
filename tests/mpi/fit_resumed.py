"""A fit on every rank's block of url-like rows, with checkpoints in DIR.

Arguments: DIR MODE SECONDS. MODE "killed": rank 1 kills itself (SIGKILL) at the end of
epoch 3 of 5, before that epoch's checkpoint; "resume": the same fit with resume=True,
then the same fit never stopped (checkpoints in DIR-never). SECONDS: "none", or
checkpoint_seconds. Rank 0 prints a JSON line: the sha256 of the resumed model and of the
one never stopped, the epochs and where the checkpoint resumed from stood.
"""

import hashlib
import json
import os
import signal
import sys

from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from testdata import url_like  # noqa: E402

from sparcml_apps import SparseSGDClassifier  # noqa: E402
from sparcml_apps.backends.pool import row_blocks  # noqa: E402
from sparcml_apps.training import checkpoint  # noqa: E402

comm = MPI.COMM_WORLD
folder, mode, seconds = sys.argv[1], sys.argv[2], sys.argv[3]


def die_on_rank1_at_epoch3(estimator, record):
    if estimator.comm.Get_rank() == 1 and record["epoch"] == 3:
        os.kill(os.getpid(), signal.SIGKILL)


X, y = url_like(6000, 50_000)
start, stop = row_blocks(X.shape[0], comm.size)[comm.rank : comm.rank + 2]


def fit(folder, resume, callback=None):
    model = SparseSGDClassifier(
        loss="log_loss",
        batch_size=4,
        local_steps=50,  # 15 exchanges an epoch: places to checkpoint within one
        max_iter=5,
        tol=None,
        random_state=0,
        comm=comm,
        checkpoint=folder,
        checkpoint_seconds=None if seconds == "none" else float(seconds),
        resume=resume,
        callback=callback,
    )
    return model.fit(X[start:stop], y[start:stop])


def digest(model):
    return hashlib.sha256(model.coef_.tobytes() + model.intercept_.tobytes()).hexdigest()


if mode == "killed":
    fit(folder, False, die_on_rank1_at_epoch3)
found = checkpoint.latest(folder, comm)
model = fit(folder, True)
never = fit(folder + "-never", False)
if comm.rank == 0:
    progress = found.metadata["progress"] if found else None
    resumed_from = progress and {"epochs": progress["epochs"], "step": progress["step"]}
    print(
        json.dumps(
            {
                "digest": digest(model),
                "never": digest(never),
                "n_iter": model.n_iter_,
                "resumed_from": resumed_from,
            }
        )
    )
