"""Fit on ``n_jobs`` local worker processes: a pool, an MPI job of its own, kept for the
next fits.

The workers of a pool (:class:`Pool`; one for each number of workers, :func:`pool`) are
``mpiexec -n N python -m sparcml_apps._worker`` in a session of their own. They start
at the pool's first fit and stay: the next fits with as many workers (a refit, the
candidates and folds of a grid search, ``partial_fit`` calls, ``warm_start``) go to the
same processes. A pool ends on :meth:`Pool.close` (:func:`close` ends them all; ``with
pool(n):`` ends one on leaving), after :data:`IDLE_SECONDS` without a fit, when a fit on
it fails, and when this interpreter exits, leaving no process, file or shared memory.
An estimator holds no pool (its ``n_jobs`` picks one at each fit): a clone or a pickle
carries none.

A fit checks its data and arguments here first, as a fit in this process does, and
raises what that one raises. It then copies the rows into shared memory that the pool
keeps for its fits (as large as the largest one's rows), one contiguous block of rows a
worker (the block rank ``r`` of ``mpiexec -n N`` takes, :func:`row_blocks`, so that the
model is that of ``mpiexec -n N`` with ``comm=``, bit for bit); each worker maps its
block, read-only and copy-on-write, and they train together over their ``COMM_WORLD``;
worker 0 sends the fitted state back, its arrays in shared memory too (sealed against
writes). Through the socket go control messages and the estimator's parameters only
(:mod:`sparcml_apps._wire`).

Only this user can reach a pool: its socket lies in a folder only the owner may enter,
and each worker proves that it holds the pool's random key (a file there, mode 0600)
before anything it sends is unpickled; the shared memory is memfds passed over that
socket, nothing in ``/dev/shm``.

This process never joins the MPI job, so nothing a worker does can end it. A failed fit
raises :class:`collectives.RankError` naming the worker's rank: an exception in a
worker, with its message; a worker that dies (its socket closes), with how it ended (the
signal that killed it, or its exit code, as ``mpiexec`` reports); a worker that stops
responding (it sends a heartbeat every :data:`HEARTBEAT_SECONDS` while it fits), after
:data:`SILENCE_SECONDS`. On any failure, and on Ctrl-C, the pool is closed (every worker
killed and reaped) before the exception leaves; the next fit starts a new one. What the
workers print is copied to this process's ``sys.stdout`` and ``sys.stderr``.
"""

import atexit
import logging
import os
import pickle
import threading
import time
import warnings

import joblib
import numpy as np

from . import _job, _wire

LOG = logging.getLogger(__name__)

WORKER = "sparcml_apps._worker"
IDLE_SECONDS = 300.0
"""A pool that runs no fit for this long closes."""
HEARTBEAT_SECONDS = 1.0
"""How often a worker that fits tells the caller that it is alive."""
SILENCE_SECONDS = 10.0
"""A worker that fits and sends nothing for this long has failed (stopped, or stuck)."""
START_SECONDS = 60.0
"""How long the workers have to start, connect and start MPI."""
GRACE_SECONDS = 5.0
"""How long ``mpiexec`` has to end once its workers have (then it is killed)."""
POLL_SECONDS = 0.1
"""How often the waiting caller copies output and checks on the workers (it does not spin)."""


def row_blocks(n_rows, n_blocks):
    """The ``n_blocks + 1`` boundaries of contiguous, nearly equal blocks of rows."""
    return np.arange(n_blocks + 1) * n_rows // n_blocks


def workers(n_jobs):
    """How many processes ``n_jobs`` asks for: None is 1; -1 all cores, -2 all but one, ...
    (joblib's convention, at least 1)."""
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        return max(joblib.cpu_count() + 1 + n_jobs, 1)
    return n_jobs


_pools = {}
_pools_lock = threading.Lock()


def pool(n_jobs):
    """The pool that fits with this ``n_jobs`` run on (its workers start at its first fit).

    Parameters
    ----------
    n_jobs : int
        As the estimators' ``n_jobs``: the number of workers, or -1 for one per core, -2
        for all cores but one, and so on. It must ask for two workers or more (one fits in
        the calling process).

    Returns
    -------
    Pool
        The same object for every ``n_jobs`` that asks for as many workers.

    Examples
    --------
    >>> with pool(2):  # doctest: +SKIP
    ...     GridSearchCV(SparseSGDClassifier(n_jobs=2), {"alpha": [1e-5, 1e-4]}).fit(X, y)
    """
    n = workers(n_jobs)
    if n < 2:
        raise ValueError(
            f"A pool has 2 or more workers (n_jobs=1 or None fits in this process). Got "
            f"n_jobs={n_jobs!r}, which asks for {n}."
        )
    with _pools_lock:
        return _pools.setdefault(n, Pool(n))


def close():
    """Close every pool: end their workers now (a pool's next fit starts new ones)."""
    with _pools_lock:
        kept = list(_pools.values())
    for each in kept:
        each.close()


def _forget_after_fork():
    """In a child of ``fork``: the parent's pools are the parent's; let go of them."""
    global _pools_lock
    _pools_lock = threading.Lock()
    for each in _pools.values():
        each._forget()


atexit.register(close)
os.register_at_fork(after_in_child=_forget_after_fork)


def fit(estimator, method, X, y, *, sample_weight=None, timings=None, **kwargs):
    """Run ``estimator.<method>(X, y, ...)`` on the pool of ``workers(estimator.n_jobs)``.

    The estimator changes only when the workers succeed. A ``timings`` dict receives the
    seconds from the call to each stage: ``checked`` (the data checked here), ``packed``
    (the rows in shared memory), ``started`` (every worker up), ``shipped`` (every task
    sent), ``first_step`` (every worker about to train), ``fitted`` (the fitted state
    received) and ``total``.
    """
    begin = time.monotonic()

    def stamp(stage):
        if timings is not None:
            timings[stage] = time.monotonic() - begin

    work = estimator._detached()  # checks the data and travels; the estimator waits
    try:  # fail here, before anything starts, on what cannot travel
        pickle.dumps((work, method, kwargs), protocol=5, buffer_callback=[].append)
    except Exception as exc:
        raise TypeError(
            f"n_jobs={estimator.n_jobs} sends the estimator and the fit arguments to other "
            f"processes, but they cannot be pickled: {exc}"
        ) from exc
    kept = pool(estimator.n_jobs)
    with kept._lock:
        kept.start()  # its workers load while this process checks and copies the rows
        X, y, weight = work._check_alone(method, X, y, sample_weight=sample_weight, **kwargs)
        weight = None if sample_weight is None else weight  # (each worker makes its ones)
        stamp("checked")
        if y.dtype == object:  # labels of Python objects (strings): each row's number
            y = _Labels(*np.unique(y, return_inverse=True))
        bounds = row_blocks(X.shape[0], kept.n)
        blocks = [_block(X, y, weight, bounds, rank) for rank in range(kept.n)]
        tasks = [(work, method, kwargs, block) for block in blocks]
        fd, packed = _wire.pack(tasks, kept._shelf)
        stamp("packed")
        state, caught = kept._run(fd, packed, stamp)
    for category, message in caught:
        warnings.warn(message, category, stacklevel=5)  # at the caller of fit
    # what the check learnt (the width, the feature names) and what the workers fitted
    own = {"n_jobs": estimator.n_jobs, "comm": estimator.comm}
    estimator.__dict__.clear()
    estimator.__dict__.update({**work.__dict__, **state, **own})
    stamp("total")
    return estimator


def _block(X, y, weight, bounds, rank):
    """The rows of worker ``rank``: CSR arrays (``indptr`` from 0), shape, y, weights."""
    start, stop = bounds[rank], bounds[rank + 1]
    first, last = X.indptr[start], X.indptr[stop]
    return (
        X.data[first:last],
        X.indices[first:last],
        X.indptr[start : stop + 1] - first,
        (stop - start, X.shape[1]),
        y[start:stop],
        None if weight is None else weight[start:stop],
    )


class _Labels:
    """Labels that are Python objects (strings), as the distinct ones and each row's
    number among them: an array of numbers travels in shared memory, one of objects
    through the socket."""

    def __init__(self, distinct, numbers):
        self.distinct, self.numbers = distinct, numbers

    def __getitem__(self, rows):
        return _Labels(self.distinct, self.numbers[rows])

    def values(self):
        """The labels, row by row."""
        return self.distinct[self.numbers]


class Pool:
    """Worker processes kept for the fits of one ``n_jobs``: get one with :func:`pool`.

    Its workers start at its first fit (or :meth:`start`) and end on :meth:`close`, after
    :data:`IDLE_SECONDS` without a fit, when a fit fails, and when the interpreter
    exits; the next fit then starts new ones. As a context manager it starts on entry
    and closes on exit. One fit runs on a pool at a time (others wait their turn).

    Attributes
    ----------
    n : int
        The number of workers.
    """

    def __init__(self, n):
        self.n = n
        self._lock = threading.RLock()
        self._job = self._timer = None
        self._shelf = _wire.Shelf()  # the rows of a fit, in shared memory

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        return f"<sparcml_apps.jobs.Pool of {self.n} workers, {self._state()}>"

    def _state(self):
        if self._job is None:
            return "closed"
        return f"pids {sorted(self.pids.values())}" if self.pids else "starting"

    @property
    def pids(self):
        """The process id of each worker by rank, once it has connected ({} if closed)."""
        job = self._job
        return {} if job is None else {rank: peer.pid for rank, peer in job.peers.items()}

    def start(self):
        """Start the workers unless they run (it returns at once: they start meanwhile)."""
        with self._lock:
            if self._job is None:
                self._job = _job.Job(self.n)
                self._idle_from_now()

    def close(self):
        """End the workers now, if they run, and free what they left (files, shared
        memory)."""
        with self._lock:
            self._end()
            self._shelf.close()

    def _end(self):
        """End the workers (the shared memory of the rows stays for the next ones)."""
        if self._timer is not None:
            self._timer.cancel()
        job, self._job = self._job, None
        if job is not None:
            job.close()

    def _run(self, fd, packed, stamp):
        """Run the tasks ``packed`` (:func:`sparcml_apps._wire.pack`) with their shared
        memory ``fd``; worker 0's fitted state and every worker's warnings."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self._job is not None and not self._job.alive():
                LOG.warning("the %d workers of a pool had ended; starting new ones", self.n)
                self._end()
            self.start()
            try:
                found = self._job.run(fd, packed, stamp)
            except BaseException:
                self._end()
                raise
            self._idle_from_now()
            return found

    def _idle_from_now(self):
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(IDLE_SECONDS, self._idle)
        self._timer.daemon = True
        self._timer.start()

    def _idle(self):
        if self._lock.acquire(blocking=False):  # else a fit runs; it sets a new timer
            try:
                if threading.current_thread() is self._timer:
                    self.close()
            finally:
                self._lock.release()

    def _forget(self):
        """Let go of the workers without ending them (in a forked child)."""
        self._lock = threading.RLock()
        self._timer = None
        self._shelf.close()  # this process's mapping and descriptor only
        job, self._job = self._job, None
        if job is not None:
            job.forget()
