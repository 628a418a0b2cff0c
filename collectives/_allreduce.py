import numbers
import os
import time
import warnings

import numpy as np
from mpi4py import MPI

from . import cost_model, thresholds
from ._algorithms import BY_NAME
from ._codec import Quantizing
from ._errors import RankError
from ._quantize import BITS
from ._stats import Stats
from ._vector import VALUE_DTYPES, SparseVector, check_values
from ._wire import Wire, run, test_until_done
from .cost_model import ALGORITHMS

_ALGORITHM_NAMES = ["auto", *ALGORITHMS]
_ALGORITHM_CODES = {name: code for code, name in enumerate(_ALGORITHM_NAMES)}
_OUTS = ("auto", "sparse", "dense")
_keyval = None


class _Channel:
    """A private duplicate of a communicator, the count of calls made on it, and how its
    ranks wait: napping when the node has more of them than cores, else polling.

    ``progress`` is the thread that drives its non-blocking calls, once there was one
    (:mod:`collectives._nonblocking`); a blocking call made while some are pending queues
    behind them, so the calls on a channel always run in the order they were made.
    """

    __slots__ = ("comm", "calls", "crowded", "progress", "calibrated")

    def __init__(self, comm):
        self.comm, self.calls, self.progress = comm, 0, None
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.crowded = node.Get_size() > len(os.sched_getaffinity(0))
        node.Free()
        # rank 0's stored calibration for this many ranks (NaN: none), alike on every rank
        calibrated = np.full(len(cost_model.NAMES), np.nan)
        if comm.Get_rank() == 0:
            try:
                found = cost_model.stored(comm.Get_size()) or {}
                calibrated[:] = [found.get(name, np.nan) for name in cost_model.NAMES]
            except (ValueError, TypeError) as exc:  # the other ranks wait in Bcast
                warnings.warn(f"{exc}; auto uses the default constants", stacklevel=2)
        comm.Bcast(calibrated, root=0)
        self.calibrated = tuple(calibrated.tolist())

    def wire(self, codec=None, blocking=None):
        """A :class:`Wire` for the next call; by default blocking when the ranks poll
        (which every rank decides alike, so their collectives match)."""
        self.calls += 1
        if blocking is None:
            blocking = not self.naps()
        return Wire(self.comm, blocking=blocking, sequence=self.calls - 1, codec=codec)

    def queued(self):
        """Whether a call made now must queue behind non-blocking ones."""
        return self.progress is not None and self.progress.pending() > 0

    def naps(self):
        if thresholds.WAIT == "auto":
            return self.crowded
        return thresholds.WAIT == "nap"

    def run(self, steps):
        if self.queued():
            return self.progress.submit(steps).wait()
        return run(steps, self.comm, nap=self.naps())

    def free(self):
        if self.progress is not None:
            self.progress.close()
        if not MPI.Is_finalized():
            self.comm.Free()


def _free_channel(comm, keyval, channel):
    channel.free()


def channel(comm):
    """The private duplicate of ``comm``, made on first use and cached on ``comm``."""
    global _keyval
    if comm is None:
        comm = MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm):
        raise TypeError(f"comm must be an mpi4py Intracomm, got {type(comm).__name__}")
    if _keyval is None:
        _keyval = MPI.Comm.Create_keyval(delete_fn=_free_channel)
    found = comm.Get_attr(_keyval)
    if found is None:
        found = _Channel(comm.Dup())
        comm.Set_attr(_keyval, found)
    return found


def wait(request, comm=None):
    """Wait for the MPI ``request`` (of an operation on ``comm``) as the collectives here
    wait on ``comm``: MPI's own wait, or on a node with more of its ranks than cores,
    testing, then yielding the core, then napping between tests, so that a rank that is
    early does not take the core from one that shares it and is still working. On one
    rank, MPI's own wait (nothing waits for another rank)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    if comm.Get_size() > 1 and channel(comm).naps():
        test_until_done(request, comm)
    else:
        request.Wait()


def cost_constants(comm=None):
    """The cost model's constants ``algorithm="auto"`` uses on ``comm``: rank 0's stored
    calibration for this many ranks, else the module's (a dict keyed by
    :data:`cost_model.NAMES`, the same on every rank)."""
    calibrated = channel(comm).calibrated
    defaults = (cost_model.ALPHA, cost_model.BETA, cost_model.GAMMA, cost_model.DENSE_GAMMA)
    return {
        name: default if value != value else value
        for name, value, default in zip(cost_model.NAMES, calibrated, defaults, strict=True)
    }


def _as_input(vec, algorithm, out, quantization_bits, random_state):
    """Check the arguments of one rank; the vector as the algorithm wants it."""
    if algorithm not in _ALGORITHM_CODES:
        raise ValueError(f"algorithm must be one of {sorted(_ALGORITHM_CODES)}, got {algorithm!r}")
    if isinstance(out, np.ndarray):
        _check_into(out, vec)
    elif out not in _OUTS:
        raise ValueError(f"out must be one of {list(_OUTS)} or an ndarray, got {out!r}")
    if quantization_bits is not None and quantization_bits not in BITS:
        raise ValueError(
            f"quantization_bits must be None or one of {list(BITS)}, got {quantization_bits!r}"
        )
    if random_state is not None and not (
        isinstance(random_state, numbers.Integral) and random_state >= 0
    ):
        raise ValueError(
            f"random_state must be None or a non-negative integer, got {random_state!r}"
        )
    if isinstance(vec, SparseVector):
        return vec
    if isinstance(vec, np.ndarray):
        return check_values(vec, "vec")
    raise TypeError(f"vec must be a SparseVector or a 1-D ndarray, got {type(vec).__name__}")


def _check_into(out, vec):
    """``out`` can take the dense sum of ``vec``: 1-D, writeable, of its size and dtype."""
    if isinstance(vec, SparseVector | np.ndarray):
        size, dtype = vec.size, vec.values.dtype if isinstance(vec, SparseVector) else vec.dtype
        if out.ndim != 1 or out.size != size or out.dtype != dtype:
            raise ValueError(
                f"out must be a 1-D array of the vector's size {size} and dtype {dtype}, got "
                f"shape {out.shape} and dtype {out.dtype}"
            )
    if not out.flags.writeable or not out.flags.c_contiguous:
        raise ValueError("out must be a writeable, contiguous array")


_MESSAGE_BYTES = 4096


def _agree(wire, vec, algorithm, error, operation="allreduce", bits=None):
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
        code = _ALGORITHM_CODES[algorithm]
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
        message = np.zeros(_MESSAGE_BYTES, np.uint8)
        if wire.rank == root:
            text = f"{type(error).__name__}: {error}".encode()[:_MESSAGE_BYTES]
            message[: len(text)] = np.frombuffer(text, np.uint8)
        yield wire.bcast(message, root, nonblocking=True)
        if error is not None:
            raise error
        raise RankError(root, message.tobytes().rstrip(b"\0").decode(errors="replace"))
    names = {
        "size": str,
        "dtype": lambda code: VALUE_DTYPES[code].name,
        "algorithm": lambda code: repr(_ALGORITHM_NAMES[code]),
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


def check(error=None, comm=None):
    """Raise on every rank of ``comm`` if any rank passes an ``error``.

    A rendezvous of all ranks: the rank that passes an exception re-raises it, the others
    raise :class:`RankError` with its message. A rank may also pass its error while the
    others are in (or about to enter) any collective of this package: it meets them there,
    and they raise instead of waiting for it forever.
    """
    if error is not None and not isinstance(error, BaseException):
        raise TypeError(f"error must be an exception or None, got {type(error).__name__}")
    chan = channel(comm)
    wire = chan.wire()
    chan.run(_agree(wire, SparseVector.empty(0), "auto", error, "check"))


def _steps(wire, vec, algorithm, out, bits, error, calibrated):
    """The whole allreduce as a generator: agreement, choice, algorithm, output form."""
    max_nnz = yield from _agree(wire, vec, algorithm, error, bits=bits)
    if algorithm == "auto":
        index_itemsize = 4 if vec.size < 2**32 else 8
        algorithm = cost_model.choose_quickly(
            wire.size, vec.size, max_nnz, vec.dtype.itemsize, index_itemsize, calibrated
        )
    if algorithm != "dense" and isinstance(vec, np.ndarray):
        vec = SparseVector.from_dense(vec)
    if isinstance(out, np.ndarray):  # the dense sum, written into out
        if algorithm == "dense":
            result = yield from BY_NAME[algorithm](wire, vec, out)
        else:
            result = yield from BY_NAME[algorithm](wire, vec)
            if isinstance(result, SparseVector):
                out[:] = 0
                out[result.indices] = result.values
            else:
                out[:] = result
        return out, algorithm
    result = yield from BY_NAME[algorithm](wire, vec)
    if out == "dense" and isinstance(result, SparseVector):
        result = result.to_dense()
    elif out == "sparse" and isinstance(result, np.ndarray):
        result = SparseVector.from_dense(result)
    return result, algorithm


def start(chan, vec, algorithm, out, quantization_bits, random_state, blocking=None):
    """The wire and steps of one allreduce call on ``chan``."""
    try:
        vec = _as_input(vec, algorithm, out, quantization_bits, random_state)
        error = None
    except (TypeError, ValueError) as exc:
        error = exc
    codec = None
    if error is None and quantization_bits and chan.comm.Get_size() > 1:
        seed = [1, chan.calls] if random_state is None else [0, random_state]
        codec = Quantizing(quantization_bits, seed)
    wire = chan.wire(codec, blocking)
    return wire, _steps(wire, vec, algorithm, out, quantization_bits, error, chan.calibrated)


def record(stats, wire, algorithm, seconds):
    """Add one call's traffic to ``stats`` (when given)."""
    if stats is None:
        return
    stats.add(
        Stats(
            algorithm=algorithm,
            calls=1,
            bytes_sent=wire.bytes_sent,
            bytes_received=wire.bytes_received,
            messages=wire.messages,
            seconds=seconds,
        )
    )


def allreduce(
    vec,
    comm=None,
    *,
    algorithm="auto",
    out="auto",
    stats=None,
    quantization_bits=None,
    random_state=None,
):
    """Sum ``vec`` elementwise over all ranks of ``comm`` (default ``MPI.COMM_WORLD``).

    ``vec`` is a :class:`SparseVector` or a dense 1-D float32/float64 array; every rank
    passes one of the same size and dtype. ``algorithm`` is one of
    ``"ssar_recursive_double"``, ``"ssar_split_allgather"``, ``"dsar_split_allgather"``,
    ``"dense"`` or ``"auto"`` (the fastest by :mod:`collectives.cost_model`), the same on
    every rank. ``out="sparse"`` returns a :class:`SparseVector`, ``out="dense"`` an
    ndarray, ``out="auto"`` the form the algorithm produced (``dense`` and a
    ``dsar_split_allgather`` that switched any range to dense give an ndarray); ``out`` an
    ndarray of the vector's size and dtype receives the dense sum and is returned (no new
    array: with ``algorithm="dense"`` it may be ``vec`` itself, summed in place, as MPI's
    ``IN_PLACE``). All ranks get bitwise the same result. ``stats``, a :class:`Stats`,
    accumulates the call's traffic.

    ``quantization_bits`` (2, 4 or 8; the same on every rank) sends the values of the sparse
    algorithms and the dense blocks of ``dsar_split_allgather`` as QSGD codes
    (:func:`collectives.quantize`): the sum is then unbiased, not exact (``dense`` sums
    exactly). ``random_state``, a non-negative integer, the same on every rank, seeds the
    rounding (each rank draws its own from it); None takes the call's number on the
    communicator instead, so a program that repeats its calls repeats its results.
    """
    begin = time.perf_counter()
    chan = channel(comm)
    wire, steps = start(chan, vec, algorithm, out, quantization_bits, random_state)
    result, algorithm = chan.run(steps)
    record(stats, wire, algorithm, time.perf_counter() - begin)
    return result


def _gather_steps(wire, vec, error):
    yield from _agree(wire, vec, "auto", error, "allgather")
    counts = np.empty(wire.size, np.int64)
    yield wire.allgather(np.array([vec.nnz], np.int64), counts)
    indices = np.empty(int(counts.sum()), vec.indices.dtype)
    values = np.empty(int(counts.sum()), vec.values.dtype)
    yield [
        wire.allgatherv(vec.indices, indices, counts),
        wire.allgatherv(vec.values, values, counts),
    ]
    ends = np.cumsum(counts)[:-1]
    return [
        SparseVector(i, v, vec.size, check=False)
        for i, v in zip(np.split(indices, ends), np.split(values, ends), strict=True)
    ]


def allgather(vec, comm=None, *, stats=None):
    """The list of every rank's :class:`SparseVector`, in rank order (any nnz per rank)."""
    begin = time.perf_counter()
    chan = channel(comm)
    wire = chan.wire()
    error = None
    if isinstance(vec, np.ndarray):
        try:
            vec = SparseVector.from_dense(vec)
        except (TypeError, ValueError) as exc:
            error = exc
    elif not isinstance(vec, SparseVector):
        error = TypeError(f"vec must be a SparseVector, got {type(vec).__name__}")
    result = chan.run(_gather_steps(wire, vec, error))
    record(stats, wire, "allgather", time.perf_counter() - begin)
    return result
