"""A child process of :mod:`sparcml_apps.spawn`: train on the rows the parent sends."""

import sys

from mpi4py import MPI
from mpi4py.util import pkl5

import collectives


def main():
    parent = pkl5.Intercomm(MPI.Comm.Get_parent())
    world = MPI.COMM_WORLD
    estimator, method, kwargs, path = parent.bcast(None, root=0)
    sys.path[:] = list(dict.fromkeys([*sys.path, *path]))
    X, y, sample_weight = parent.recv(source=0)
    estimator.comm = world
    try:
        getattr(estimator, method)(X, y, sample_weight=sample_weight, **kwargs)
        result = ("ok", {k: v for k, v in estimator.__dict__.items() if k != "comm"})
    except collectives.RankError as exc:
        result = ("error", (exc.rank, exc.message))
    except Exception as exc:  # noqa: BLE001 - sent to the parent
        result = ("error", (world.Get_rank(), f"{type(exc).__name__}: {exc}"))
    if world.Get_rank() == 0:
        parent.send(result, dest=0)
    parent.Disconnect()


if __name__ == "__main__":
    main()
