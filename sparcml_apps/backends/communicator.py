"""The backend of the ranks of a communicator: every rank of an ``mpiexec`` job calls
``fit`` with its own rows and the same ``comm`` (SPMD); all end with the same model."""


def fit(task, X, y, *, sample_weight=None):
    """Fit ``task`` on every rank of its ``comm``, over this rank's rows; the task."""
    task.run(task.comm, X, y, sample_weight)
    return task
