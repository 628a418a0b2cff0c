"""A call of ``fit`` or ``partial_fit`` as an estimator hands it to a backend."""


class FitTask:
    """One call of ``fit`` or ``partial_fit``, as an estimator hands it to a backend.

    The backend (:mod:`sparcml_apps.backends`) fits it through these methods only.

    A backend that fits in this process :meth:`run`\\ s the task it is given: that fits the
    estimator itself. One that fits in other processes sends them a :meth:`detached`
    copy (it pickles), which each runs there; it brings the :meth:`fitted_state` of one
    of them back into its copy here (:meth:`take`) and returns that copy, whose fitted
    state the estimator then takes over.

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

    def check(self, X, y, sample_weight=None):
        """Check the data and arguments in this process before other processes fit.

        It raises what a fit here would raise before it trains. The estimator learns only
        what checking the data learns (its width, the feature names).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows, as the estimator's ``fit`` takes them.
        y : array-like of shape (n_samples,)
            The targets.
        sample_weight : array-like of shape (n_samples,), default=None
            The weight of each row (None: all 1).

        Returns
        -------
        X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
            The rows, float64 or float32.
        y : ndarray of shape (n_samples,)
            The targets.
        sample_weight : ndarray of shape (n_samples,)
            The weights, float64 (ones for None).

        Raises
        ------
        ValueError
            What the estimator's ``fit`` (or ``partial_fit``) on this process alone
            raises before it trains.

        Examples
        --------
        >>> import numpy as np
        >>> from sparcml_apps.estimators import FitTask, SparseSGDClassifier
        >>> task = FitTask(SparseSGDClassifier(), "fit", {})
        >>> X, y, weight = task.check(np.eye(3), [0, 1, 1])
        >>> X.format, weight
        ('csr', array([1., 1., 1.]))
        >>> task.check(np.eye(3), [0, 0, 0])
        Traceback (most recent call last):
        ...
        ValueError: The number of classes has to be greater than one; got 1 class: [0].
        """
        return self._estimator._check_alone(
            self.method, X, y, sample_weight=sample_weight, **self.arguments
        )

    def run(self, comm, X, y, sample_weight=None):
        """Fit on every rank of ``comm``, each rank with its own rows.

        Every rank calls this (SPMD), and every rank ends with the same model. In a
        detached task the estimator takes ``comm`` as its own (a callback finds it there).

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
        self._estimator._fit_on(
            comm,
            X,
            y,
            partial=self.method == "partial_fit",
            sample_weight=sample_weight,
            **self.arguments,
        )

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
