"""A child process of :mod:`sparcml_apps.spawn`: train on the rows the parent sends.

Whatever goes wrong, the child takes every message the parent sent, tells the parent
(child 0 does, after all children agreed through :func:`collectives.check`) and exits
normally: an abnormal exit of a spawned process would take the parent down with it.
"""

import os
import sys
import threading
import time

from mpi4py import MPI
from mpi4py.util import pkl5

import collectives


def _exit_when_gone(pid):
    """Leave as soon as the parent process no longer exists."""
    while True:
        time.sleep(0.5)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(3)


def main():
    parent = pkl5.Intercomm(MPI.Comm.Get_parent())
    world = MPI.COMM_WORLD
    parent_pid, path = parent.bcast(None, root=0)
    threading.Thread(target=_exit_when_gone, args=(parent_pid,), daemon=True).start()
    sys.path[:] = list(dict.fromkeys([*sys.path, *path]))
    error = None
    try:
        estimator, method, kwargs = parent.bcast(None, root=0)
    except Exception as exc:  # noqa: BLE001 - reported to the parent below
        error = exc
    try:
        X, y, sample_weight = parent.recv(source=0)
    except Exception as exc:  # noqa: BLE001
        error = error or exc
    try:
        collectives.check(error, world)
        estimator.comm = world
        getattr(estimator, method)(X, y, sample_weight=sample_weight, **kwargs)
        result = ("ok", estimator._fitted_state())
    except collectives.RankError as exc:
        result = ("error", (exc.rank, exc.message))
    except Exception as exc:  # noqa: BLE001 - sent to the parent
        result = ("error", (world.Get_rank(), f"{type(exc).__name__}: {exc}"))
    if world.Get_rank() == 0:
        try:
            parent.send(result, dest=0)
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle
            parent.send(("error", (0, f"{type(exc).__name__}: {exc}")), dest=0)
    parent.Disconnect()


if __name__ == "__main__":
    main()
