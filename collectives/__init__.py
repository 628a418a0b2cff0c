"""Sparse collectives for MPI: SparCML's sparse allreduce over mpi4py.

Importing the package neither initializes MPI nor loads numba; the first call that
needs them does.

- :class:`SparseVector`: sorted unique ``uint32`` (or ``uint64``) indices and float32 or
  float64 values.
- :func:`allreduce`, :func:`iallreduce`, :func:`allgather`: the collectives, on any mpi4py
  intracommunicator (``comm=None`` means ``MPI.COMM_WORLD``); :func:`check` and
  :func:`wait` to fail and wait as they do; :class:`RankError` where another rank failed;
  :class:`Stats` for their traffic.
- :func:`quantize`, :func:`dequantize`: QSGD values of :data:`BITS` bits.
- :mod:`collectives.cost_model` (with :func:`calibrate`, :func:`cost_constants`) picks
  one of :data:`ALGORITHMS` for ``algorithm="auto"``; :mod:`collectives.thresholds` holds
  the switch points.

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> import collectives
>>> vec = collectives.SparseVector.from_dense(np.array([0.0, 2.0, 0.0, 3.0], np.float32))
>>> collectives.allreduce(vec, MPI.COMM_SELF, out="dense").tolist()  # one rank: vec
[0.0, 2.0, 0.0, 3.0]
"""

from . import cost_model, thresholds
from ._errors import RankError
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
    if name in ("BITS", "Quantized", "dequantize", "quantize"):  # numba's, on first use
        from . import _quantize

        return getattr(_quantize, name)
    if name == "iallreduce":
        from ._nonblocking import iallreduce

        return iallreduce
    if name == "calibrate":
        from ._calibrate import calibrate

        return calibrate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
