"""Sparse collectives for MPI: SparCML's sparse allreduce over mpi4py.

Importing the package does not initialize MPI; the first collective call does.
"""

from . import cost_model, thresholds
from ._errors import RankError
from ._stats import Stats
from ._vector import SparseVector

ALGORITHMS = (
    "ssar_recursive_double",
    "ssar_split_allgather",
    "dsar_split_allgather",
    "dense",
)
"""The names ``allreduce`` accepts besides ``"auto"``."""

__all__ = [
    "ALGORITHMS",
    "RankError",
    "SparseVector",
    "Stats",
    "allgather",
    "allreduce",
    "check",
    "cost_model",
    "thresholds",
]


def __getattr__(name):
    # the collectives import mpi4py.MPI, which initializes MPI: only on first use
    if name in ("allreduce", "allgather", "check"):
        from . import _allreduce

        return getattr(_allreduce, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
