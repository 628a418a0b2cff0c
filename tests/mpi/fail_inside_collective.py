"""Rank 1 fails inside a collective that every rank agreed to run, and then does what
training does with an error: passes it to ``collectives.check``. The others wait for it
inside that call, so the job must end (aborted, rank 1's error on its stderr), not hang.

Argument: "fit" (out of memory in the third exchange of a fit on every rank),
"overlap" (the same, the exchanges summed while the next step is computed) or "wait"
(an MPI error while rank 1 waits inside an ``iallreduce``).
"""

import sys

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

import collectives
from collectives import _algorithms, _wire
from sparcml_apps import SparseSGDClassifier

comm = MPI.COMM_WORLD
mode = sys.argv[1]
calls = 0


def failing(algorithm):
    """``algorithm``, out of memory at its third call (mode "wait": an MPI error in the
    first wait of its third call)."""

    def steps(*args):
        global calls
        calls += 1
        if calls == 3 and mode != "wait":
            raise MemoryError("no room for the values received")
        return (yield from algorithm(*args))

    return steps


def failing_done(pending, comm):
    if calls >= 3:
        raise MPI.Exception(MPI.ERR_OTHER)
    return done(pending, comm)


done = _wire._done
if comm.rank == 1:
    for name, algorithm in list(_algorithms.BY_NAME.items()):
        _algorithms.BY_NAME[name] = failing(algorithm)
    if mode == "wait":
        _wire._done = failing_done

try:
    if mode == "wait":
        vec = collectives.SparseVector([comm.rank], [1.0], 1000)
        for _ in range(5):
            collectives.iallreduce(vec, comm, algorithm="ssar_recursive_double").wait()
    else:
        X, y = make_classification(n_samples=3000, n_features=20, random_state=comm.rank)
        model = SparseSGDClassifier(comm=comm, max_iter=5, tol=None, overlap=mode == "overlap")
        model.fit(X.astype(np.float32), y)
except Exception as exc:  # noqa: BLE001 - as training does
    collectives.check(exc, comm)
print("returned", flush=True)
