"""The backend of this process alone: one rank, ``MPI.COMM_SELF``, the same training code
as on many."""


def fit(task, X, y, *, sample_weight=None):
    """Fit ``task`` in this process; the task."""
    from mpi4py import MPI

    task.run(MPI.COMM_SELF, X, y, sample_weight)
    return task
