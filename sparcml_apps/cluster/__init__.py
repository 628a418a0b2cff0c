"""Dask on MPI: the cluster bootstrap, the workers' communicator and ``fit`` on Dask arrays.

Every rank of an ``mpiexec -n P`` job calls :func:`initialize`: rank 0 runs the Dask
scheduler, rank 1 goes on with the client code, ranks 2.. run one Dask worker each and
share an MPI communicator of their own, over which :func:`fit` trains.
"""

from ._bootstrap import JOIN_SECONDS, initialize, shutdown, worker_comm
from ._fit import fit

__all__ = ["JOIN_SECONDS", "fit", "initialize", "shutdown", "worker_comm"]
