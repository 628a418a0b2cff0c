"""The backend of this process alone: one rank, ``MPI.COMM_SELF``, the same training code
as on many."""


def fit(task, X, y, *, sample_weight=None):
    """Fit ``task`` in this process; the task.

    Parameters
    ----------
    task : sparcml_apps.estimators.FitTask
        The call of ``fit`` or ``partial_fit``.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The rows.
    y : array-like of shape (n_samples,)
        The targets.
    sample_weight : array-like of shape (n_samples,), default=None
        The weight of each row (None: all 1).

    Returns
    -------
    FitTask
        ``task``, whose estimator is fitted.

    Raises
    ------
    ValueError
        What the estimator's ``fit`` raises on bad data or arguments.

    Examples
    --------
    What ``SparseSGDClassifier().fit(X, y)`` does:

    >>> from sparcml_apps import SparseSGDClassifier
    >>> from sparcml_apps.backends import in_process
    >>> from sparcml_apps.datasets import make_url_like
    >>> from sparcml_apps.estimators import FitTask
    >>> X, y = make_url_like(1000, 1000, 20, random_state=0)
    >>> model = SparseSGDClassifier(random_state=0)
    >>> task = FitTask(model, "fit", {})
    >>> in_process.fit(task, X, y) is task
    True
    >>> model.coef_.shape
    (1, 1000)
    """
    from mpi4py import MPI

    task.run(MPI.COMM_SELF, X, y, sample_weight)
    return task
