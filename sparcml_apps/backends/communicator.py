"""The backend of the ranks of a communicator: every rank of an ``mpiexec`` job calls
``fit`` with its own rows and the same ``comm`` (SPMD); all end with the same model."""


def fit(task, X, y, *, sample_weight=None):
    """Fit ``task`` on every rank of its ``comm``, over this rank's rows; the task.

    Every rank of ``task.comm`` calls it, each with its own rows, and every rank ends
    with the same model.

    Parameters
    ----------
    task : sparcml_apps.estimators.FitTask
        The call of ``fit`` or ``partial_fit``, of an estimator whose ``comm`` is set.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        This rank's rows.
    y : array-like of shape (n_samples,)
        This rank's targets.
    sample_weight : array-like of shape (n_samples,), default=None
        The weight of each of this rank's rows (None: all 1).

    Returns
    -------
    FitTask
        ``task``, whose estimator is fitted.

    Raises
    ------
    ValueError
        What the estimator's ``fit`` raises on bad data or arguments, on every rank.
    collectives.RankError
        On every other rank, when one rank fails.

    Examples
    --------
    What ``SparseSGDClassifier(comm=comm).fit(X, y)`` does on each rank (here a
    communicator of one rank):

    >>> from mpi4py import MPI
    >>> from sparcml_apps import SparseSGDClassifier
    >>> from sparcml_apps.backends import communicator
    >>> from sparcml_apps.datasets import make_url_like
    >>> from sparcml_apps.estimators import FitTask
    >>> X, y = make_url_like(1000, 1000, 20, random_state=0)
    >>> model = SparseSGDClassifier(comm=MPI.COMM_SELF, random_state=0)
    >>> communicator.fit(FitTask(model, "fit", {}), X, y).comm is MPI.COMM_SELF
    True
    >>> model.coef_.shape
    (1, 1000)
    """
    task.run(task.comm, X, y, sample_weight)
    return task
