"""The dask-mpi bootstrap, the workers' MPI communicator and a clean shutdown."""

import atexit
import gc
import os
import sys
import time

import collectives

CLIENT_RANK = 1
"""The rank that runs the client code (as in dask-mpi: rank 0 runs the scheduler, the ranks
after this one a worker each)."""
SHUTDOWN_SECONDS = 30
"""How long the client waits for the workers to retire before it ends the job."""

JOIN_SECONDS = 120
"""How long the client waits for the workers to join the scheduler."""

_comms = {}  # tuple of COMM_WORLD ranks -> an intracommunicator of those ranks
_job = {"started": False, "stuck": False}  # by initialize here; workers left in a collective
_closed = {}  # "comm": a duplicate of the job's communicator, for the workers' last word


def initialize(
    *, interface=None, insecure=False, dashboard=False, dashboard_address=None, **dask_mpi_options
):
    """Start Dask on the ranks of this MPI job; return on rank 1 only (the client).

    Every rank calls it. Before the cluster starts, ranks 2.. split off a communicator of
    their own (see :func:`worker_comm`); then :func:`dask_mpi.initialize` runs the
    scheduler on rank 0 and a worker on each rank from 2 on. Those ranks exit (status 0)
    when the cluster shuts down; rank 1 returns once every worker has joined, and shuts
    the cluster down when it exits (:func:`shutdown`).

    Parameters
    ----------
    interface : str, optional
        The network interface the scheduler and the workers listen on (``"ib0"``, say).
        Default: the loopback interface when every rank runs on this host, else every
        interface of the host.
    insecure : bool, default=False
        Without it, every connection to the scheduler and the workers is TLS with mutual
        authentication: rank 0 makes a private key and a self-signed certificate for this
        run and hands them to the other ranks over MPI (they stay in memory); the dask
        config of every rank, the client's included, holds them, and a process without
        them cannot connect. With it, plain TCP: any process that reaches the addresses
        can run code in the cluster.
    dashboard : bool, default=False
        Serve the scheduler's dashboard (HTTP, no TLS) at ``dashboard_address`` (default
        port 8787 on the address the scheduler listens on). Without it the scheduler's and
        the workers' HTTP servers serve nothing, on the loopback interface or ``interface``.
    dashboard_address : str, optional
        Where the dashboard listens, as ``"HOST:PORT"``.
    **dask_mpi_options
        Passed to ``dask_mpi.initialize``; ``nthreads`` defaults to 1 (one task at a time:
        a task may enter an MPI collective). ``comm`` (default ``COMM_WORLD``) must span
        the whole job.

    Returns
    -------
    bool
        True, on rank 1; the other ranks exit.

    Raises
    ------
    ValueError
        When the job has fewer than 3 ranks.

    See Also
    --------
    shutdown : Stop the cluster (at exit, or by hand).

    Examples
    --------
    A script that every rank of ``mpiexec -n 4 python script.py`` runs; the client goes
    on past ``initialize`` and fits on the 2 workers:

    >>> import dask.array as da
    >>> from distributed import Client
    >>> from sparcml_apps import SparseSGDClassifier
    >>> from sparcml_apps.cluster import initialize
    >>> initialize()  # doctest: +SKIP
    True
    >>> client = Client()  # doctest: +SKIP
    >>> X = da.random.random((10_000, 50), chunks=(2_500, 50))  # doctest: +SKIP
    >>> y = (X[:, 0] > 0.5).astype(int)  # doctest: +SKIP
    >>> model = SparseSGDClassifier().fit(X, y)  # doctest: +SKIP
    """
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import dask_mpi
    from mpi4py import MPI

    from ._guard import protection

    comm = dask_mpi_options.pop("comm", None) or MPI.COMM_WORLD
    if comm.Get_size() < 3:
        raise ValueError(
            "initialize needs at least 3 MPI ranks (a scheduler, a client and a worker); "
            f"got {comm.Get_size()}"
        )
    collectives.check(comm=comm)  # the first collective: MPICH's files are unlinked
    rank = comm.Get_rank()
    workers = comm.Split(0 if rank > CLIENT_RANK else MPI.UNDEFINED, rank)
    if workers != MPI.COMM_NULL:
        _comms[_world_ranks(workers)] = workers
    _closed["comm"] = comm.Dup()
    options = protection(
        comm,
        interface=interface,
        insecure=insecure,
        dashboard=dashboard,
        dashboard_address=dashboard_address,
        options={"nthreads": 1, **dask_mpi_options},
    )
    is_client = dask_mpi.initialize(comm=comm, exit=False, **options)
    if not is_client:
        if rank > CLIENT_RANK:  # this worker has closed: tell the client, which waits for it
            _closed["comm"].send(None, dest=CLIENT_RANK)
        sys.exit(0)
    from distributed import Client

    with Client() as client:  # return once every worker has joined
        client.wait_for_workers(comm.Get_size() - 2, timeout=JOIN_SECONDS)
    _job["started"] = True
    atexit.register(shutdown)
    return True


def _world_ranks(comm):
    """The ``COMM_WORLD`` ranks of the members of ``comm``, in its rank order."""
    from mpi4py import MPI

    group, world = comm.Get_group(), MPI.COMM_WORLD.Get_group()
    ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
    group.Free()
    world.Free()
    return tuple(ranks)


def worker_comm(world_ranks):
    """The intracommunicator of the ``COMM_WORLD`` ranks ``world_ranks`` (in that order).

    Made on first use, collectively over those ranks only (``MPI_Comm_create_group``), and
    kept: every member must call it with the same ranks. Ranks started by
    :func:`initialize` find theirs made already (by ``Split``, before the cluster started).

    Parameters
    ----------
    world_ranks : sequence of int
        The ``COMM_WORLD`` ranks of the members, in the order of their ranks in the
        communicator; this rank among them.

    Returns
    -------
    mpi4py.MPI.Intracomm
        The communicator of those ranks (the same object on every later call).

    Examples
    --------
    On the workers of a job started by :func:`initialize` under ``mpiexec -n 4``, ranks 2
    and 3:

    >>> from sparcml_apps.cluster import worker_comm
    >>> comm = worker_comm((2, 3))  # doctest: +SKIP
    >>> comm.Get_size(), comm is worker_comm([2, 3])  # doctest: +SKIP
    (2, True)
    """
    from mpi4py import MPI

    key = tuple(int(rank) for rank in world_ranks)
    if key not in _comms:
        world = MPI.COMM_WORLD
        group = world.Get_group()
        members = group.Incl(list(key))
        _comms[key] = world.Create_group(members)
        members.Free()
        group.Free()
    return _comms[key]


def describe_worker():
    """This worker's place in MPI: ``(rank, size)`` of ``COMM_WORLD``, or None outside MPI.

    Never starts MPI: a worker process that has not started it is no MPI rank.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    return mpi.COMM_WORLD.Get_rank(), mpi.COMM_WORLD.Get_size()


def mark_stuck():
    """Note that workers are inside a collective they cannot finish: only ending the MPI
    job (``MPI_Abort``) frees them; :func:`shutdown` does that."""
    _job["stuck"] = True


def shutdown(client=None):
    """Retire every worker, then stop the scheduler; the job's other ranks exit with 0.

    Called when the client process exits (after :func:`initialize`) or by hand. In a job
    started by :func:`initialize`, when workers are stuck in a collective (a worker was
    lost during ``fit``) or do not retire within ``SHUTDOWN_SECONDS``, it ends the whole
    MPI job with ``MPI_Abort``; elsewhere it raises.

    Parameters
    ----------
    client : distributed.Client, optional
        A client of the cluster. Default: this process's default client, else a client
        of the scheduler that the dask config names (closed again after).

    Raises
    ------
    OSError
        When no client is given or found and no scheduler answers within
        ``SHUTDOWN_SECONDS``.
    Exception
        Outside a job started by :func:`initialize`, what retiring the workers or
        stopping the scheduler raised.

    Examples
    --------
    On the client (rank 1) of a job started by :func:`initialize`, to stop the cluster
    before the script ends:

    >>> from sparcml_apps.cluster import shutdown
    >>> shutdown()  # doctest: +SKIP
    """
    from distributed import Client, default_client

    if _job["stuck"] and _job["started"]:
        _abort()
    try:
        client = client or default_client()
        owned = False
    except ValueError:  # no client in this process: connect to the scheduler of dask.config
        client, owned = Client(timeout=SHUTDOWN_SECONDS), True
    try:
        _retire_all(client)
        client.shutdown()
    except Exception:
        if not _job["started"]:
            raise
        _abort()  # a cluster of this job that cannot stop cleanly is ended
    finally:
        if owned:
            client.close()


def _retire_all(client):
    """Retire every worker, after dropping whatever data this client still holds."""
    from distributed import Future

    gc.collect()  # futures held only by reference cycles (tracebacks, say) go now
    settled, deadline = time.monotonic() + 2, time.monotonic() + SHUTDOWN_SECONDS
    while client.futures and time.monotonic() < settled:
        time.sleep(0.05)  # futures just dropped are still being released
    if client.futures:  # data the caller still holds: the cluster is going away anyway
        client.cancel([Future(key, client) for key in list(client.futures)], force=True)
    try:
        client.run(_stop_heartbeats, callback_timeout=_left(deadline))
        while workers := list(client.scheduler_info(n_workers=-1)["workers"]):
            client.sync(
                client.scheduler.retire_workers,
                workers=workers,
                close_workers=True,
                remove=True,
                callback_timeout=_left(deadline),
            )
    except TimeoutError as exc:
        raise TimeoutError(f"the workers did not retire in {SHUTDOWN_SECONDS} s") from exc
    # a retired worker closes a moment later; a scheduler that stops before then logs the
    # worker's failed heartbeat or its own cancelled read as an error
    _wait_closed(deadline)
    while time.monotonic() < deadline and client.run_on_scheduler(
        _worker_streams, callback_timeout=_left(deadline)
    ):
        time.sleep(0.05)


def _left(deadline):
    """The seconds left until ``deadline`` (a ``time.monotonic()``): what a call on the
    cluster may take; :class:`TimeoutError` once none are left."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left")
    return left


def _wait_closed(deadline):
    """Wait until every worker rank of a job started by :func:`initialize` has closed."""
    if "comm" not in _closed or not _job["started"]:
        return
    from mpi4py import MPI

    comm = _closed.pop("comm")
    closed = [comm.irecv(source=rank) for rank in range(CLIENT_RANK + 1, comm.Get_size())]
    while not MPI.Request.testall(closed)[0]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the workers did not close in {SHUTDOWN_SECONDS} s")
        time.sleep(0.05)


def _stop_heartbeats(dask_worker):
    """The worker sends the scheduler no more heartbeats: one under way as the scheduler
    retires the worker fails on the connection it closes, and the worker logs the failure
    as an error."""
    dask_worker.periodic_callbacks["heartbeat"].stop()


def _worker_streams(dask_scheduler):
    """How many workers' streams the scheduler still reads."""
    return sum(op == "register-worker" for op in dask_scheduler._comms.values())


def _abort():
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(1)
