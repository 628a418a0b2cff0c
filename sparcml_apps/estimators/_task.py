"""A call of ``fit`` or ``partial_fit`` as an estimator hands it to a backend."""


class FitTask:
    """One call of ``fit`` or ``partial_fit``, as an estimator hands it to a backend
    (:mod:`sparcml_apps.backends`), which fits it through these methods only.

    A backend that fits in this process :meth:`run`\\ s the task it is given: that fits the
    estimator itself. One that fits in other processes sends them a :meth:`detached`
    copy (it pickles), which each runs there; it brings the :meth:`fitted_state` of one
    of them back into its copy here (:meth:`take`) and returns that copy, whose fitted
    state the estimator then takes over.

    Attributes
    ----------
    method : {"fit", "partial_fit"}
        The call.
    arguments : dict
        The call's other arguments but ``sample_weight``: ``classes`` of
        ``partial_fit``; ``coef_init`` and ``intercept_init`` of ``fit``.
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
        """A task of a bare copy of the estimator, to send to other processes: the same
        parameters and fitted state, with no communicator or processes of its own."""
        return FitTask(self._estimator._detached(), self.method, self.arguments, detached=True)

    def check(self, X, y, sample_weight=None):
        """Check the data and arguments in this process before other processes fit:
        raise what a fit here would raise before it trains. The checked ``(X, y,
        sample_weight)``, ``X`` as CSR; the estimator learns only what checking the data
        learns (its width, the feature names)."""
        return self._estimator._check_alone(
            self.method, X, y, sample_weight=sample_weight, **self.arguments
        )

    def run(self, comm, X, y, sample_weight=None):
        """Fit on every rank of ``comm``, each rank with its own rows: every rank calls
        this (SPMD), and every rank ends with the same model. In a detached task the
        estimator takes ``comm`` as its own (a callback finds it there)."""
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
        """What fitting added: the fitted attributes and the training state; with
        ``plain``, the training state as a dict of its arrays (Dask sends the arrays of a
        dict as they are, and those of an object pickled: one more copy)."""
        return self._estimator._fitted_state(plain=plain)

    def take(self, state):
        """Take the :meth:`fitted_state` of a copy of this task fitted elsewhere (plain
        or not); this task."""
        self._estimator._take_state(state)
        return self
