"""Fit on ``n_jobs`` local MPI processes started for the call with ``COMM_SELF.Spawn``.

The parent checks the data, sends each child a contiguous block of rows (the same blocks
as ranks of ``mpiexec -n n_jobs`` would take), the children train together over their
own ``COMM_WORLD``, and child 0 sends the fitted estimator back. An exception in any child
reaches every child (:func:`collectives.check`) and comes back to the parent as
:class:`collectives.RankError`; children leave on their own if the parent dies. A child
that crashes outright (killed, out of memory) makes MPI's process manager end the parent
too: that is how MPI treats a spawned job that aborts.
"""

import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import collectives

CHILD = "sparcml_apps._spawned"
POLL_SECONDS = 0.01  # how often the waiting parent looks for the result (it does not spin)


def row_blocks(n_rows, n_blocks):
    """The ``n_blocks + 1`` boundaries of contiguous, nearly equal blocks of rows."""
    return np.arange(n_blocks + 1) * n_rows // n_blocks


def _ensure_mpiexec_on_path():
    # MPI starts the children through the mpiexec beside this interpreter
    here = str(Path(sys.executable).parent)
    if here not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")


def _take(array, start, stop):
    return None if array is None else array[start:stop]


def fit(estimator, method, X, y, *, sample_weight=None, **kwargs):
    """Run ``estimator.<method>(X, y, ...)`` on ``estimator.n_jobs`` spawned processes."""
    from mpi4py import MPI
    from mpi4py.util import pkl5

    X, y, sample_weight, _, _ = estimator._validate_fit_data(
        X, y, sample_weight, reset=not hasattr(estimator, "coef_")
    )
    if not sp.issparse(X):
        X = sp.csr_matrix(X)
    n_jobs = estimator.n_jobs
    child = estimator._detached()
    try:  # fail here, before any process starts, on what cannot travel
        pickle.dumps((child, method, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise TypeError(
            f"n_jobs={n_jobs} sends the estimator and the fit arguments to other "
            f"processes, but they cannot be pickled: {exc}"
        ) from exc
    _ensure_mpiexec_on_path()
    inter = MPI.COMM_SELF.Spawn(sys.executable, args=["-m", CHILD], maxprocs=n_jobs)
    channel = pkl5.Intercomm(inter)
    try:
        # first what the children need to unpickle the rest
        channel.bcast((os.getpid(), sys.path), root=MPI.ROOT)
        channel.bcast((child, method, kwargs), root=MPI.ROOT)
        bounds = row_blocks(X.shape[0], n_jobs)
        for rank in range(n_jobs):
            start, stop = bounds[rank], bounds[rank + 1]
            block = (X[start:stop], y[start:stop], _take(sample_weight, start, stop))
            channel.send(block, dest=rank)
        while (message := channel.improbe(source=0)) is None:
            time.sleep(POLL_SECONDS)
        result = message.recv()
    finally:
        inter.Disconnect()
    outcome, payload = result
    if outcome == "error":
        rank, message = payload
        raise collectives.RankError(rank, message)
    estimator.__dict__.update(payload)
    return estimator
