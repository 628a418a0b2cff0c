"""The agreement that starts every collective call, and what a rank's failure past it does.

Every call first reduces a small header in one non-blocking allreduce: whether a rank
failed, and the size, dtype, algorithm and quantization each rank passed. Every rank then
raises the same error or goes on together (:func:`agree`). Once they go on, the others
wait for each rank inside the call: a rank that fails there ends the job
(:func:`past_agreement`).
"""

import sys
import traceback

import numpy as np
from mpi4py import MPI

from ._errors import RankError
from ._vector import VALUE_DTYPES, SparseVector
from .cost_model import ALGORITHMS

ALGORITHM_NAMES = ["auto", *ALGORITHMS]
ALGORITHM_CODES = {name: code for code, name in enumerate(ALGORITHM_NAMES)}
MESSAGE_BYTES = 4096


def agree(wire, vec, algorithm, error, operation="allreduce", bits=None):
    """Check that no rank failed and all hold vectors of one size and dtype for one algorithm
    and one quantization.

    One ``Iallreduce(MAX)`` of a small header, the first step of every collective here,
    blocking or not (so a failing rank's :func:`check` meets whichever the others make);
    every rank raises the same error when one failed or they disagree, so no rank goes on
    alone into a collective that would hang. A failed rank's message is broadcast to the others,
    which raise :class:`RankError`. Returns the largest local nonzero count.
    """
    if error is None:
        size = vec.size
        nnz = vec.nnz if isinstance(vec, SparseVector) else vec.size
        dtype_code = VALUE_DTYPES.index(vec.dtype)
        code = ALGORITHM_CODES[algorithm]
        bits = bits or 0
        failed = 0
    else:
        size = nnz = dtype_code = code = bits = 0
        failed = wire.rank + 1
    header = np.array(
        [size, -size, dtype_code, -dtype_code, code, -code, bits, -bits, nnz, failed], np.int64
    )
    agreed = np.empty_like(header)
    yield wire.allreduce(header, agreed, MPI.MAX, nonblocking=True)
    if agreed[-1]:
        root = int(agreed[-1]) - 1
        message = np.zeros(MESSAGE_BYTES, np.uint8)
        if wire.rank == root:
            text = f"{type(error).__name__}: {error}".encode()[:MESSAGE_BYTES]
            message[: len(text)] = np.frombuffer(text, np.uint8)
        yield wire.bcast(message, root, nonblocking=True)
        if error is not None:
            raise error
        raise RankError(root, message.tobytes().rstrip(b"\0").decode(errors="replace"))
    names = {
        "size": str,
        "dtype": lambda code: VALUE_DTYPES[code].name,
        "algorithm": lambda code: repr(ALGORITHM_NAMES[code]),
        "quantization_bits": lambda bits: repr(int(bits) or None),
    }
    for at, (what, name_of) in enumerate(names.items()):
        low, high = -agreed[2 * at + 1], agreed[2 * at]
        if low != high:
            raise ValueError(
                f"{operation}: the ranks disagree on {what}: this rank passed "
                f"{name_of(header[2 * at])}, the ranks range from {name_of(low)} "
                f"to {name_of(high)}"
            )
    return int(agreed[-2])


def past_agreement(wire, operation, steps):
    """Run ``steps``, the rest of a collective that every rank agreed to run.

    The other ranks wait for this one inside that call, where no error can reach them: a
    failure here (out of memory, an MPI error, an interrupt) would leave them waiting
    forever. With more than one rank it is printed to stderr, and the MPI job aborted.
    """
    try:
        return (yield from steps)
    except GeneratorExit:
        raise
    except BaseException as exc:
        if wire.size == 1:
            raise
        traceback.print_exception(exc, file=sys.stderr)
        print(
            f"collectives: rank {wire.rank} of {wire.size} failed inside an {operation} "
            f"that every rank had agreed to run ({type(exc).__name__}: {exc}); the other "
            "ranks wait for it there, where no error reaches them, so the MPI job is "
            "aborted",
            file=sys.stderr,
            flush=True,
        )
        wire.comm.Abort(1)
