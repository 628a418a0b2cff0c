"""Sparse collectives for MPI: SparCML's sparse allreduce over mpi4py.

Importing the package does not initialize MPI; the first collective call does.
"""

from . import cost_model, thresholds
from ._errors import RankError
from ._quantize import BITS, Quantized, dequantize, quantize
from ._stats import Stats
from ._vector import SparseVector
from .cost_model import ALGORITHMS

__all__ = [
    "ALGORITHMS",
    "BITS",
    "Quantized",
    "RankError",
    "SparseVector",
    "Stats",
    "allgather",
    "allreduce",
    "calibrate",
    "check",
    "cost_constants",
    "cost_model",
    "dequantize",
    "iallreduce",
    "quantize",
    "thresholds",
    "wait",
]


def __getattr__(name):
    # the collectives import mpi4py.MPI, which initializes MPI: only on first use
    if name in ("allreduce", "allgather", "check", "cost_constants", "wait"):
        from . import _allreduce

        return getattr(_allreduce, name)
    if name == "iallreduce":
        from ._nonblocking import iallreduce

        return iallreduce
    if name == "calibrate":
        from ._calibrate import calibrate

        return calibrate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
