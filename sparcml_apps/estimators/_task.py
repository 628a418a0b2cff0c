"""A call of ``fit`` or ``partial_fit`` as an estimator hands it to a backend."""

import contextlib
import functools

from threadpoolctl import ThreadpoolController

from .. import training
from ..inputs import row_blocks


class FitTask:
    """One call of ``fit`` or ``partial_fit``, as an estimator hands it to a backend.

    The backend (:mod:`sparcml_apps.backends`) fits it through these methods only.

    A backend that fits in this process :meth:`run`\\ s the task it is given: that fits the
    estimator itself. One that fits in other processes works on a :meth:`detached` copy
    and returns it, fitted, for the estimator to take over. It either sends the copy (it
    pickles) to processes that each :meth:`run` it on their rows and brings the
    :meth:`fitted_state` of one of them back (:meth:`take`), or it :meth:`plans` the fit
    here and sends each process its plan, which needs only
    :mod:`sparcml_apps.training` there, and brings back what they trained
    (:meth:`finish`).

    Parameters
    ----------
    estimator : SparseSGDClassifier or SparseSGDRegressor
        The estimator to fit (its parameters checked by the estimator's ``fit``).
    method : {"fit", "partial_fit"}
        The call.
    arguments : dict
        The call's other arguments but ``sample_weight``, by name: ``classes`` of
        ``partial_fit``; ``coef_init`` and ``intercept_init`` of ``fit`` (those left out
        are None).
    detached : bool, default=False
        Whether ``estimator`` is a bare copy to fit in another process, which then takes
        the communicator it fits on as its ``comm`` (:meth:`detached` makes such tasks).

    Attributes
    ----------
    method : {"fit", "partial_fit"}
        The call.
    arguments : dict
        The call's other arguments but ``sample_weight``.

    See Also
    --------
    sparcml_apps.backends : The backends, and the ``fit`` each has.

    Examples
    --------
    What the backend of this process does (:func:`sparcml_apps.backends.in_process.fit`):

    >>> from mpi4py import MPI
    >>> from sparcml_apps.datasets import make_url_like
    >>> from sparcml_apps.estimators import FitTask, SparseSGDClassifier
    >>> X, y = make_url_like(1000, 1000, 20, random_state=0)
    >>> model = SparseSGDClassifier(random_state=0)
    >>> task = FitTask(model, "fit", {})
    >>> task.run(MPI.COMM_SELF, X, y)
    >>> model.coef_.shape
    (1, 1000)

    What one that fits elsewhere does, here in this process too:

    >>> model = SparseSGDClassifier(random_state=0)
    >>> task = FitTask(model, "fit", {})
    >>> away = task.detached()
    >>> away.run(MPI.COMM_SELF, X, y)  # in another process, over the workers' communicator
    >>> hasattr(model, "coef_")
    False
    >>> task.take(away.fitted_state()) is task
    True
    >>> model.coef_.shape
    (1, 1000)
    """

    def __init__(self, estimator, method, arguments, *, detached=False):
        self._estimator = estimator
        self._detached = detached
        self.method = method
        self.arguments = arguments

    @property
    def n_jobs(self):
        """The estimator's ``n_jobs`` (None in a detached task)."""
        return self._estimator.n_jobs

    @property
    def checkpoint(self):
        """The estimator's ``checkpoint`` folder, or None."""
        return self._estimator.checkpoint

    @property
    def comm(self):
        """The estimator's ``comm``, or None (None in a detached task)."""
        return self._estimator.comm

    def detached(self):
        """A task of a bare copy of the estimator, to send to other processes.

        The copy has the same parameters and fitted state, with no communicator or
        processes of its own.

        Returns
        -------
        FitTask
            The same call, of a copy of the estimator whose ``comm`` and ``n_jobs`` are
            None; it pickles (when the estimator's parameters and the arguments do).

        Examples
        --------
        >>> from mpi4py import MPI
        >>> from sparcml_apps.estimators import FitTask, SparseSGDClassifier
        >>> task = FitTask(SparseSGDClassifier(n_jobs=2, comm=MPI.COMM_SELF), "fit", {})
        >>> away = task.detached()
        >>> away.n_jobs, away.comm, away.method
        (None, None, 'fit')
        >>> task.n_jobs
        2
        """
        return FitTask(self._estimator._detached(), self.method, self.arguments, detached=True)

    def plans(self, X, y, sample_weight=None, *, ranks):
        """Plan the fit of ``ranks`` ranks that hold blocks of the rows, in this process.

        The estimator checks the data and the arguments as a fit on one rank does, and
        sets up what a fit on ``ranks`` ranks shares; each rank's
        :class:`~sparcml_apps.training.Plan` holds its block of the rows. A process
        that runs one needs :mod:`sparcml_apps.training`, not this estimator, and the
        ranks train as if each had been given its block by :meth:`run` (SPMD): the same
        model, bit for bit. :meth:`finish` takes what they trained.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            All the rows, as the estimator's ``fit`` takes them.
        y : array-like of shape (n_samples,)
            The targets.
        sample_weight : array-like of shape (n_samples,), default=None
            The weight of each row (None: all 1).
        ranks : int
            The number of ranks; each holds a contiguous block of the rows, in order
            (:func:`sparcml_apps.inputs.row_blocks`).

        Returns
        -------
        list of sparcml_apps.training.Plan
            The plan of each rank.

        Raises
        ------
        ValueError
            What the estimator's ``fit`` (or ``partial_fit``) raises before it trains.

        Examples
        --------
        >>> import numpy as np
        >>> from sparcml_apps.estimators import FitTask, SparseSGDClassifier
        >>> task = FitTask(SparseSGDClassifier(random_state=0), "fit", {}).detached()
        >>> first, second = task.plans(np.eye(4), ["a", "b", "b", "a"], ranks=2)
        >>> first.X.shape, second.y
        ((2, 4), array([ 1., -1.]))
        >>> task.plans(np.eye(3), [0, 0, 0], ranks=2)
        Traceback (most recent call last):
        ...
        ValueError: The number of classes has to be greater than one; got 1 class: [0].
        """
        from mpi4py import MPI

        plan = self._plan(MPI.COMM_SELF, X, y, sample_weight, ranks=ranks)
        return plan.blocks(row_blocks(plan.X.shape[0], ranks))

    def finish(self, trained):
        """Take what the ranks of :meth:`plans` trained: the estimator is fitted.

        Parameters
        ----------
        trained : sparcml_apps.training.Trained
            What :func:`sparcml_apps.training.run` returned on the ranks.

        Returns
        -------
        FitTask
            This task, whose estimator now holds the fitted state.

        Examples
        --------
        >>> import numpy as np
        >>> from mpi4py import MPI
        >>> from sparcml_apps import training
        >>> from sparcml_apps.estimators import FitTask, SparseSGDRegressor
        >>> task = FitTask(SparseSGDRegressor(random_state=0), "fit", {})
        >>> (plan,) = task.plans(np.eye(3), [1.0, 2.0, 3.0], ranks=1)
        >>> task.finish(training.run(plan, MPI.COMM_SELF)) is task
        True
        >>> task.fitted_state()["coef_"].shape
        (3,)
        """
        self._estimator._finish(trained, partial=self._partial)
        return self

    def run(self, comm, X, y, sample_weight=None):
        """Fit on every rank of ``comm``, each rank with its own rows.

        Every rank calls this (SPMD), and every rank ends with the same model. In a
        detached task the estimator takes ``comm`` as its own (a callback finds it there).
        On several ranks, each rank trains with one thread in its BLAS and OpenMP pools
        (:func:`_one_thread_a_rank`).

        Parameters
        ----------
        comm : mpi4py.MPI.Intracomm
            The ranks that fit together (``MPI.COMM_SELF``: this process alone).
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            This rank's rows (none, on some ranks, when others hold rows).
        y : array-like of shape (n_samples,)
            This rank's targets.
        sample_weight : array-like of shape (n_samples,), default=None
            The weight of each of this rank's rows (None: all 1).

        Raises
        ------
        ValueError
            What the estimator's ``fit`` raises on bad data or arguments, on every rank.
        collectives.RankError
            On every other rank, when one rank fails.

        Examples
        --------
        >>> from mpi4py import MPI
        >>> from sparcml_apps.datasets import make_url_like
        >>> from sparcml_apps.estimators import FitTask, SparseSGDRegressor
        >>> X, y = make_url_like(1000, 1000, 20, random_state=0)
        >>> model = SparseSGDRegressor(random_state=0)
        >>> FitTask(model, "partial_fit", {}).run(MPI.COMM_SELF, X, y)
        >>> model.n_iter_, model.coef_.shape
        (1, (1000,))
        """
        if self._detached:
            self._estimator.comm = comm
        plan = self._plan(comm, X, y, sample_weight)
        with _one_thread_a_rank(comm):
            trained = training.run(plan, comm)
        self.finish(trained)

    @property
    def _partial(self):
        return self.method == "partial_fit"

    def _plan(self, comm, X, y, sample_weight, ranks=None):
        """The estimator's plan of this call on ``comm`` (for ``ranks`` ranks)."""
        return self._estimator._plan(
            comm, X, y, partial=self._partial, sample_weight=sample_weight, ranks=ranks,
            **self.arguments,
        )  # fmt: skip

    def fitted_state(self, *, plain=False):
        """What fitting added: the fitted attributes and the training state.

        Parameters
        ----------
        plain : bool, default=False
            Give the training state as a dict of its arrays (Dask sends the arrays of a
            dict as they are, and those of an object pickled: one more copy).

        Returns
        -------
        dict
            The estimator's attributes ending in ``_`` (``coef_``, ``n_iter_``, ...) and
            its training state, by name; :meth:`take` takes it.

        Examples
        --------
        >>> import numpy as np
        >>> from mpi4py import MPI
        >>> from sparcml_apps.estimators import FitTask, SparseSGDRegressor
        >>> task = FitTask(SparseSGDRegressor(random_state=0), "fit", {})
        >>> task.run(MPI.COMM_SELF, np.eye(3), [1.0, 2.0, 3.0])
        >>> sorted(name for name in task.fitted_state() if name.endswith("_"))[:3]
        ['coef_', 'comm_stats_', 'intercept_']
        """
        return self._estimator._fitted_state(plain=plain)

    def take(self, state):
        """Take the :meth:`fitted_state` of a copy of this task fitted elsewhere.

        Parameters
        ----------
        state : dict
            The :meth:`fitted_state` of the copy, plain or not.

        Returns
        -------
        FitTask
            This task, whose estimator now holds the fitted state.

        Examples
        --------
        >>> import numpy as np
        >>> from mpi4py import MPI
        >>> from sparcml_apps.estimators import FitTask, SparseSGDRegressor
        >>> task = FitTask(SparseSGDRegressor(random_state=0), "fit", {})
        >>> away = task.detached()
        >>> away.run(MPI.COMM_SELF, np.eye(3), [1.0, 2.0, 3.0])
        >>> fitted = task.take(away.fitted_state(plain=True))
        >>> fitted is task
        True
        """
        self._estimator._take_state(state)
        return self


def _one_thread_a_rank(comm):
    """One thread in each BLAS and OpenMP pool of this process while it trains on
    several ranks of ``comm`` (a context manager; on one rank, nothing changes).

    The ranks are the fit's parallelism, one a core. A BLAS that a rank calls between
    epochs (the penalty of the model, where a fit stops on its loss) would otherwise
    start a thread for every core, which then spin, waiting for more work, on the cores
    of the other ranks: on two ranks of two cores, such a fit (``early_stopping=False``,
    400,000 url-like rows, 16 epochs) took 4.1 to 4.6 s, with one thread 3.3 to 3.6 s.
    The launchers of this package set ``OPENBLAS_NUM_THREADS=1`` already; a job that
    ``mpiexec`` alone starts does not. The pools are found once a process (1 to 2 ms),
    then limited in microseconds, each ``partial_fit`` of a loop included.
    """
    if comm.Get_size() == 1:
        return contextlib.nullcontext()
    return _pools().limit(limits=1)


@functools.cache
def _pools():
    return ThreadpoolController()
