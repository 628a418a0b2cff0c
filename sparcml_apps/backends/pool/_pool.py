"""The pools of worker processes, one for each number of workers, and a fit on one."""

import atexit
import logging
import os
import pickle
import threading
import time
import warnings

import joblib
import numpy as np

from ...datasets import row_blocks
from . import _job, _wire, limits

LOG = logging.getLogger("sparcml_apps.backends.pool")


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


def fit(task, X, y, *, sample_weight=None):
    """Fit ``task`` (:class:`sparcml_apps.estimators.FitTask`) on the pool of
    ``workers(task.n_jobs)``; a detached copy of the task that took the fitted state.

    The task's estimator changes only when the workers succeed. The pool's
    :attr:`Pool.timings` then hold the seconds from the call to each stage of the fit.
    """
    begin = time.monotonic()
    timings = {}

    def stamp(stage):
        timings[stage] = time.monotonic() - begin

    work = task.detached()  # checks the data and travels; the estimator waits
    try:  # fail here, before anything starts, on what cannot travel
        pickle.dumps(work, protocol=5, buffer_callback=[].append)
    except Exception as exc:
        raise TypeError(
            f"n_jobs={task.n_jobs} sends the estimator and the fit arguments to other "
            f"processes, but they cannot be pickled: {exc}"
        ) from exc
    kept = pool(task.n_jobs)
    with kept._lock:
        kept.start()  # its workers load while this process checks and copies the rows
        X, y, weight = work.check(X, y, sample_weight)
        weight = None if sample_weight is None else weight  # (each worker makes its ones)
        stamp("checked")
        if y.dtype == object:  # labels of Python objects (strings): each row's number
            y = Labels(*np.unique(y, return_inverse=True))
        bounds = row_blocks(X.shape[0], kept.n)
        blocks = [_block(X, y, weight, bounds, rank) for rank in range(kept.n)]
        tasks = [(work, block) for block in blocks]
        fd, packed = _wire.pack(tasks, kept._shelf)
        stamp("packed")
        state, caught = kept._run(fd, packed, stamp)
    for category, message in caught:
        warnings.warn(message, category, stacklevel=5)  # at the caller of fit
    work.take(state)  # with what the check learnt (the width, the feature names)
    stamp("total")
    kept.timings = timings
    return work


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


class Labels:
    """Labels that are Python objects (strings), as the distinct ones and each row's
    number among them: an array of numbers travels in shared memory, one of objects
    through the socket."""

    def __init__(self, distinct, numbers):
        self.distinct, self.numbers = distinct, numbers

    def __getitem__(self, rows):
        return Labels(self.distinct, self.numbers[rows])

    def values(self):
        """The labels, row by row."""
        return self.distinct[self.numbers]


class Pool:
    """Worker processes kept for the fits of one ``n_jobs``: get one with :func:`pool`.

    Its workers start at its first fit (or :meth:`start`) and end on :meth:`close`, after
    :data:`limits.IDLE_SECONDS` without a fit, when a fit fails, and when the interpreter
    exits; the next fit then starts new ones. As a context manager it starts on entry
    and closes on exit. One fit runs on a pool at a time (others wait their turn).

    Attributes
    ----------
    n : int
        The number of workers.
    timings : dict
        The seconds from the call of its last fit to each stage: ``checked`` (the data
        checked here), ``packed`` (the rows in shared memory), ``started`` (every worker
        up), ``shipped`` (every task sent), ``first_step`` (every worker about to train),
        ``fitted`` (the fitted state received) and ``total``.
    """

    def __init__(self, n):
        self.n = n
        self.timings = {}
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
        """Run the tasks ``packed`` (:func:`._wire.pack`) with their shared
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
        self._timer = threading.Timer(limits.IDLE_SECONDS, self._idle)
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
