"""The backend of a Dask cluster (on MPI, :mod:`sparcml_apps.cluster`): ``fit`` on Dask
arrays, one pinned task per worker training on the chunks held there (with checkpoints,
on a contiguous block of the chunks, the same in every run)."""

import time
import traceback

import numpy as np
import scipy.sparse as sp

import collectives

from ..cluster._bootstrap import describe_worker, mark_stuck, worker_comm
from ..inputs import as_scipy, row_blocks

POLL_SECONDS = 0.2
"""How often the client looks at the training tasks and at the workers they run on."""


def fit(task, X, y, *, sample_weight=None):
    """Fit ``task`` on the workers of the active Dask client; the copy of the task that fitted.

    The copy is a detached one of the task (:class:`sparcml_apps.estimators.FitTask`).
    ``X`` is a Dask array chunked by rows (scipy CSR, pydata ``sparse`` or dense chunks),
    ``y`` and ``sample_weight`` Dask or numpy arrays of as many rows. The chunks are
    computed where Dask places them; each worker then trains, over the workers' MPI
    communicator, on the chunks it holds, concatenated in row order (a worker that holds
    none takes part with no rows).

    Parameters
    ----------
    task : sparcml_apps.estimators.FitTask
        The call of ``fit`` or ``partial_fit``.
    X : dask.array.Array of shape (n_samples, n_features)
        The rows, chunked by rows.
    y : dask.array.Array or array-like of shape (n_samples,)
        The targets.
    sample_weight : dask.array.Array or array-like of shape (n_samples,), default=None
        The weight of each row (None: all 1).

    Returns
    -------
    FitTask
        A detached copy of ``task`` that holds what the workers fitted (the estimator
        takes it over).

    Raises
    ------
    ValueError
        When there is no Dask client or the arrays do not fit together, and what the
        estimator's ``fit`` raises on bad data or arguments.
    collectives.RankError
        When a worker fails or is lost during the fit.

    Examples
    --------
    What ``SparseSGDClassifier().fit(X, y)`` does with a Dask array ``X``, on the client
    of an MPI job started by :func:`sparcml_apps.cluster.initialize`:

    >>> import dask.array as da
    >>> from sparcml_apps import SparseSGDClassifier
    >>> from sparcml_apps.backends import dask_cluster
    >>> from sparcml_apps.estimators import FitTask
    >>> X = da.random.random((10_000, 50), chunks=(2_500, 50))  # doctest: +SKIP
    >>> y = (X[:, 0] > 0.5).astype(int)  # doctest: +SKIP
    >>> task = FitTask(SparseSGDClassifier(random_state=0), "fit", {})
    >>> fitted = dask_cluster.fit(task, X, y)  # doctest: +SKIP
    """
    client = _client()
    ranks = _worker_ranks(client)
    X, y, sample_weight = _aligned(X, y, sample_weight)
    layout = (X.shape[1], _value_dtype(X.dtype), y.dtype)
    arrays = [a for a in (X, y, sample_weight) if a is not None]
    try:
        work = task.detached()
        state = _fit_on_workers(client, ranks, work, arrays, layout)
    except BaseException as exc:
        # the frames of the traceback hold futures of the chunks: let them go now, so
        # that the workers can drop the data (and retire) while the error is handled
        traceback.clear_frames(exc.__traceback__)
        raise
    return work.take(state)


def _fit_on_workers(client, ranks, work, arrays, layout):
    """Persist the arrays, run one training task on each worker; the fitted state."""
    from distributed import futures_of

    arrays = client.persist(arrays)
    futures = {f.key: f for f in futures_of(arrays)}
    _wait_for_chunks(client, list(futures.values()), ranks)
    if work.checkpoint is None:
        owners = _owners(client, arrays[0], ranks)
    else:  # a run to resume needs the same rows on every rank, wherever Dask put them
        owners = _in_row_order(arrays[0].numblocks[0], len(ranks))
    blocks = [[[futures[k] for k in _row_keys(a, rows)] for a in arrays] for rows in owners]
    reporter = next((i for i, rows in enumerate(owners) if rows), 0)
    addresses = list(ranks)
    tasks = [
        client.submit(
            _train,
            work,
            tuple(ranks.values()),
            *blocks[i],
            layout=layout,
            report=i == reporter,
            workers=[address],
            allow_other_workers=False,
            pure=False,
            key=f"sparcml-{work.method}-{address}-{time.monotonic_ns()}",
        )
        for i, address in enumerate(addresses)
    ]
    return _result(client, tasks, ranks, reporter)


def _client():
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        raise ValueError(
            "fit was given a Dask array, but no Dask client is active: start the cluster "
            "with sparcml_apps.cluster.initialize() under mpiexec (or the dask-mpi command) "
            "and create a distributed.Client"
        ) from None


def _worker_ranks(client):
    """``{worker address: COMM_WORLD rank}`` in rank order; a clear error unless the
    workers are distinct ranks of one MPI job."""
    places = client.run(describe_worker)
    if not places:
        raise ValueError(f"the Dask cluster at {client.scheduler.address} has no workers")
    outside = sorted(address for address, place in places.items() if place is None)
    sizes = {place[1] for place in places.values() if place is not None}
    ranks = [place[0] for place in places.values() if place is not None]
    if outside or len(sizes) > 1 or len(set(ranks)) < len(ranks):
        described = ", ".join(
            f"{address}: " + ("no MPI" if place is None else f"rank {place[0]} of {place[1]}")
            for address, place in sorted(places.items())
        )
        raise ValueError(
            "the Dask workers are not ranks of one MPI job; expected each worker on its own "
            "rank (sparcml_apps.cluster.initialize, or dask-mpi with --worker-class "
            f"distributed.Worker); got {described}"
        )
    return dict(sorted(((a, p[0]) for a, p in places.items()), key=lambda item: item[1]))


def _aligned(X, y, sample_weight):
    """The arrays as Dask arrays with the row chunks of ``X`` (and X in one column chunk)."""
    import dask.array as da

    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D Dask array; got {X.ndim} dimensions")
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    rows = X.chunks[0]
    aligned = [X]
    for name, array in (("y", y), ("sample_weight", sample_weight)):
        if array is None:
            aligned.append(None)
            continue
        if not isinstance(array, da.Array):
            array = np.asarray(array)
            if np.isnan(X.shape[0]):
                raise ValueError(
                    f"{name} must be a Dask array when X has chunks of unknown size; got "
                    f"{type(array).__name__} (or call X.compute_chunk_sizes() first)"
                )
            array = da.from_array(array, chunks=(rows,))
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-D; got {array.ndim} dimensions")
        if np.isnan(X.shape[0]) or np.isnan(array.shape[0]):
            # sizes unknown (as from one loader): chunk i of each holds the same rows;
            # each worker checks that its rows and targets agree
            if array.numblocks[0] != X.numblocks[0]:
                raise ValueError(
                    f"{name} must have the row chunks of X when their sizes are unknown; got "
                    f"{array.numblocks[0]} chunks for X's {X.numblocks[0]}"
                )
        elif array.chunks[0] != rows:
            if array.shape[0] != X.shape[0]:
                raise ValueError(f"{name} has {array.shape[0]} rows; X has {X.shape[0]}")
            array = array.rechunk((rows,))
        aligned.append(array)
    return aligned


def _row_keys(array, rows):
    keys = array.__dask_keys__()
    return [keys[i][0] if array.ndim == 2 else keys[i] for i in rows]


def _wait_for_chunks(client, futures, ranks):
    """Wait until every chunk is computed; raise the first chunk's error (a malformed
    file, say) before any worker enters a collective."""
    _watch(client, futures, ranks, "loading the data")
    for future in futures:
        if future.status == "error":
            raise future.exception()


def _owners(client, X, ranks):
    """For each worker (in rank order), the indices of the row chunks of X it holds."""
    holders = client.who_has(X)
    owners = {address: [] for address in ranks}
    for i, key in enumerate(_row_keys(X, range(X.numblocks[0]))):
        held = [address for address in holders.get(key, ()) if address in owners]
        if not held:
            raise RuntimeError(f"chunk {i} of X is on no worker of the cluster ({key!r})")
        owners[min(held, key=ranks.get)].append(i)
    return list(owners.values())


def _in_row_order(n_chunks, n_workers):
    """For each worker (in rank order), a contiguous block of the chunks' indices."""
    bounds = row_blocks(n_chunks, n_workers)
    return [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _watch(client, futures, ranks, doing):
    """Wait for ``futures`` to finish or fail, or for one of the workers to leave."""
    checked = time.monotonic()
    while not all(f.status in ("finished", "error") for f in futures):
        if any(f.status == "error" for f in futures):
            return
        time.sleep(POLL_SECONDS)
        if time.monotonic() - checked > 1.0 or any(f.status == "lost" for f in futures):
            checked = time.monotonic()
            gone = _gone(client, ranks, doing)
            if gone:
                address = gone[0]
                raise collectives.RankError(
                    ranks[address],
                    f"the Dask worker {address} (MPI rank {ranks[address]}) left the cluster "
                    f"while {doing}; the job cannot go on without it",
                )


def _gone(client, ranks, doing):
    """The workers of ``ranks`` that left the cluster; an error if the scheduler is gone."""
    try:
        if client.status != "running":
            raise OSError(f"the client is {client.status}")
        info = client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=10)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(
            f"lost the Dask scheduler at {client.scheduler.address} while {doing}: the "
            f"cluster ended (a worker or the scheduler died?): {exc}"
        ) from None
    return [address for address in ranks if address not in info["workers"]]


def _result(client, tasks, ranks, reporter):
    """The reporter's fitted state; else the first failure (the failing rank's own error
    in preference to the others' RankError)."""
    try:
        _watch(client, tasks, ranks, "training")
    except collectives.RankError:  # a worker left: the others are stuck in a collective
        mark_stuck()
        raise
    failed = [task for task in tasks if task.status == "error"]
    if failed:
        deadline = time.monotonic() + 10 * POLL_SECONDS
        while not all(t.done() for t in tasks) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)  # the other ranks raise RankError at once
        errors = [t.exception() for t in tasks if t.status == "error"]
        own = [e for e in errors if not isinstance(e, collectives.RankError)]
        raise (own or errors)[0]
    return tasks[reporter].result()


def _value_dtype(dtype):
    dtype = np.dtype(dtype)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def _stack(blocks):
    """One worker's chunks as one matrix, in row order (CSR when they are sparse)."""
    blocks = [as_scipy(b) for b in blocks]
    if all(sp.issparse(b) for b in blocks):
        return sp.vstack(blocks, format="csr") if len(blocks) > 1 else blocks[0].tocsr()
    return np.concatenate([b.toarray() if sp.issparse(b) else np.asarray(b) for b in blocks])


def _vector(blocks):
    return np.concatenate([np.asarray(as_scipy(b)).ravel() for b in blocks])


def _train(work, world_ranks, xs, ys, ws=None, *, layout, report):
    """On a worker: fit over the workers' communicator on the rows of its chunks."""
    comm = worker_comm(world_ranks)
    if xs:
        X, y = _stack(xs), _vector(ys)
    else:  # no rows here: take part with none, of the width and types of the others'
        n_features, dtype, y_dtype = layout
        X, y = sp.csr_matrix((0, n_features), dtype=dtype), np.empty(0, y_dtype)
    sample_weight = None if ws is None else _vector(ws) if ws else np.empty(0)
    work.run(comm, X, y, sample_weight)
    if not report:
        return None
    return work.fitted_state(plain=True)
