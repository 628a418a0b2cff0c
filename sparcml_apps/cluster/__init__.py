"""Dask on MPI: the cluster bootstrap and the workers' communicator.

Every rank of an ``mpiexec -n P`` job calls :func:`initialize`: rank 0 runs the Dask
scheduler, rank 1 goes on with the client code, ranks 2.. run one Dask worker each and
share an MPI communicator of their own, over which a fit on Dask arrays trains
(:mod:`sparcml_apps.backends.dask_cluster`).
"""

from ._bootstrap import JOIN_SECONDS, initialize, shutdown, worker_comm

__all__ = ["JOIN_SECONDS", "initialize", "shutdown", "worker_comm"]
