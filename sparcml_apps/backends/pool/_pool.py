"""The pools of worker processes, one for each number of workers, and a fit on one."""

import atexit
import logging
import os
import pickle
import threading
import time
import warnings

from . import _job, _wire, limits

LOG = logging.getLogger("sparcml_apps.backends.pool")


def workers(n_jobs):
    """How many processes ``n_jobs`` asks for: None is 1; -1 all cores, -2 all but one, ...
    (joblib's convention, at least 1).

    Parameters
    ----------
    n_jobs : int or None
        As the estimators' ``n_jobs``: a number of processes; -1 for one per core
        (``joblib.cpu_count()``), -2 for all cores but one, and so on; None for 1.

    Returns
    -------
    int
        The number of processes, at least 1 for None and negative ``n_jobs``.

    Examples
    --------
    >>> import joblib
    >>> from sparcml_apps.jobs import workers
    >>> workers(None), workers(1), workers(4)
    (1, 1, 4)
    >>> workers(-1) == joblib.cpu_count()
    True
    >>> workers(-1000)
    1
    """
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        import joblib  # (not in the workers, which never count cores)

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

    Raises
    ------
    ValueError
        When ``n_jobs`` asks for fewer than two workers.

    See Also
    --------
    close : Close every pool.

    Examples
    --------
    Getting a pool starts nothing:

    >>> from sparcml_apps.jobs import pool
    >>> pool(2)
    <sparcml_apps.jobs.Pool of 2 workers, closed>
    >>> pool(2) is pool(2)
    True
    >>> pool(1)
    Traceback (most recent call last):
    ...
    ValueError: A pool has 2 or more workers ... Got n_jobs=1, which asks for 1.

    Its workers start ahead of the fits, and end on leaving the block (this starts 2
    ``mpiexec`` processes):

    >>> from sklearn.model_selection import GridSearchCV
    >>> from sparcml_apps import SparseSGDClassifier
    >>> from sparcml_apps.datasets import make_url_like
    >>> X, y = make_url_like(2000, 10_000, 20, random_state=0)
    >>> search = GridSearchCV(SparseSGDClassifier(n_jobs=2), {"alpha": [1e-5, 1e-4]})
    >>> with pool(2):  # doctest: +SKIP
    ...     search = search.fit(X, y)
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
    """Close every pool: end their workers now (a pool's next fit starts new ones).

    It runs when the interpreter exits, too; a pool that is closed already stays so.

    See Also
    --------
    Pool.close : Close one pool.

    Examples
    --------
    >>> from sparcml_apps.jobs import close, pool
    >>> close()
    >>> pool(2).pids
    {}
    """
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
    """Fit ``task`` on the pool of ``workers(task.n_jobs)``; the copy of the task that fitted.

    The copy is a detached one of the task (:class:`sparcml_apps.estimators.FitTask`): it
    plans the fit here (:meth:`~sparcml_apps.estimators.FitTask.plans`), each worker
    trains on its plan and the copy takes what worker 0 trained. The task's estimator
    changes only when the workers succeed. The pool's
    :attr:`Pool.timings` then hold the seconds from the call to each stage of the fit.

    Parameters
    ----------
    task : sparcml_apps.estimators.FitTask
        The call of ``fit`` or ``partial_fit``, of an estimator whose ``n_jobs`` asks for
        two workers or more.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        All the rows; each worker gets a contiguous block of them
        (:func:`sparcml_apps.inputs.row_blocks`).
    y : array-like of shape (n_samples,)
        The targets.
    sample_weight : array-like of shape (n_samples,), default=None
        The weight of each row (None: all 1).

    Returns
    -------
    FitTask
        A detached copy of ``task`` that holds what the workers fitted (the estimator
        takes it over).

    Raises
    ------
    TypeError
        When the estimator or the arguments cannot be pickled.
    ValueError
        What a fit in this process raises on the data and arguments, before any worker
        trains.
    collectives.RankError
        When a worker fails, dies or stops responding (the pool is then closed).

    Examples
    --------
    What ``SparseSGDClassifier(n_jobs=2).fit(X, y)`` does (this starts 2 ``mpiexec``
    processes):

    >>> from sparcml_apps import SparseSGDClassifier
    >>> from sparcml_apps.backends import pool
    >>> from sparcml_apps.datasets import make_url_like
    >>> from sparcml_apps.estimators import FitTask
    >>> X, y = make_url_like(2000, 10_000, 20, random_state=0)
    >>> task = FitTask(SparseSGDClassifier(n_jobs=2, random_state=0), "fit", {})
    >>> fitted = pool.fit(task, X, y)  # doctest: +SKIP
    >>> sorted(pool.pool(2).timings)  # doctest: +SKIP
    ['checked', 'first_step', 'fitted', 'packed', 'shipped', 'started', 'total']
    """
    begin = time.monotonic()
    timings = {}

    def stamp(stage):
        timings[stage] = time.monotonic() - begin

    work = task.detached()  # planned and fitted here, while the estimator waits
    try:  # fail here, before anything starts, on what cannot travel
        pickle.dumps(work, protocol=5, buffer_callback=[].append)
    except Exception as exc:
        raise TypeError(
            f"n_jobs={task.n_jobs} sends the estimator and the fit arguments to other "
            f"processes, but they cannot be pickled: {exc}"
        ) from exc
    kept = pool(task.n_jobs)
    with kept._lock:
        kept.start()  # its workers load while this process plans and copies the rows
        plans = work.plans(X, y, sample_weight, ranks=kept.n)
        stamp("checked")
        fd, packed = _wire.pack(plans, kept._shelf)
        stamp("packed")
        trained, caught = kept._run(fd, packed, stamp)
    for category, message in caught:
        warnings.warn(message, category, stacklevel=5)  # at the caller of fit
    work.finish(trained)
    stamp("total")
    kept.timings = timings
    return work


class Pool:
    """Worker processes kept for the fits of one ``n_jobs``: get one with :func:`pool`.

    Its workers start at its first fit (or :meth:`start`) and end on :meth:`close`, after
    :data:`limits.IDLE_SECONDS` without a fit, when a fit fails, and when the interpreter
    exits; the next fit then starts new ones. As a context manager it starts on entry
    and closes on exit. One fit runs on a pool at a time (others wait their turn).

    Parameters
    ----------
    n : int
        The number of workers (2 or more).

    Attributes
    ----------
    n : int
        The number of workers.
    timings : dict
        The seconds from the call of its last fit to each stage: ``checked`` (the data
        checked here), ``packed`` (the rows in shared memory), ``started`` (every worker
        up), ``shipped`` (every task sent), ``first_step`` (every worker about to train),
        ``fitted`` (the fitted state received) and ``total``.

    See Also
    --------
    pool : The pool of an ``n_jobs``.
    close : Close every pool.

    Examples
    --------
    >>> from sparcml_apps.jobs import pool
    >>> kept = pool(2)
    >>> kept.n, kept.pids
    (2, {})

    With its workers up for the block (this starts 2 ``mpiexec`` processes):

    >>> with kept:  # doctest: +SKIP
    ...     sorted(kept.pids)  # the ranks that have connected
    [0, 1]
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
        """The process id of each worker by rank, once it has connected ({} if closed).

        Returns
        -------
        dict of int to int
            ``{rank: process id}`` of the workers that have connected.

        Examples
        --------
        >>> from sparcml_apps.jobs import pool
        >>> pool(2).pids
        {}
        """
        job = self._job
        return {} if job is None else {rank: peer.pid for rank, peer in job.peers.items()}

    def start(self):
        """Start the workers unless they run (it returns at once: they start meanwhile).

        They are ``mpiexec -n n`` processes in a session of their own; the next fit
        waits for them to be up (:data:`limits.START_SECONDS` at most).

        See Also
        --------
        close : End the workers.

        Examples
        --------
        >>> from sparcml_apps.jobs import pool
        >>> kept = pool(2)
        >>> kept.start()  # doctest: +SKIP
        >>> kept  # doctest: +SKIP
        <sparcml_apps.jobs.Pool of 2 workers, starting>
        >>> kept.close()
        """
        with self._lock:
            if self._job is None:
                self._job = _job.Job(self.n)
                self._idle_from_now()

    def close(self):
        """End the workers now, if they run, and free what they left (files, shared memory).

        Closing a closed pool does nothing; the next fit on it starts new workers.

        See Also
        --------
        start : Start the workers.

        Examples
        --------
        >>> from sparcml_apps.jobs import pool
        >>> kept = pool(2)
        >>> kept.close()
        >>> kept
        <sparcml_apps.jobs.Pool of 2 workers, closed>
        """
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
