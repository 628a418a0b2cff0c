import contextlib
import numbers
import os
import time
import warnings
from pathlib import Path

import numpy as np
from mpi4py import MPI

from . import cost_model, thresholds
from ._agreement import ALGORITHM_CODES, agree, past_agreement
from ._algorithms import BY_NAME
from ._codec import Quantizing
from ._quantize import BITS
from ._stats import Stats
from ._vector import SparseVector, check_values
from ._wire import Wire, run, test_until_done

_OUTS = ("auto", "sparse", "dense")
_keyval = None


class _Channel:
    """A private duplicate of a communicator, the count of calls made on it, and how its
    ranks wait: napping when the node has more of them than cores, else polling.

    Once every rank of the node has started MPI, the names of MPICH's shared memory
    (``/dev/shm/mpich_shm_*``, made by the first rank at start) are unlinked
    (:func:`_unlink_node_memory`): a job whose ranks are killed leaves nothing there.

    ``progress`` is the thread that drives its non-blocking calls, once there was one
    (:mod:`collectives._nonblocking`); a blocking call made while some are pending queues
    behind them, so the calls on a channel always run in the order they were made.
    """

    __slots__ = ("comm", "calls", "crowded", "progress", "calibrated")

    def __init__(self, comm):
        self.comm, self.calls, self.progress = comm, 0, None
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.crowded = node.Get_size() > len(os.sched_getaffinity(0))
        node.Free()  # collective: the ranks of this node are all past MPI's start
        _unlink_node_memory()
        # rank 0's stored calibration for this many ranks (NaN: none), alike on every rank
        calibrated = np.full(len(cost_model.NAMES), np.nan)
        if comm.Get_rank() == 0:
            try:
                found = cost_model.stored(comm.Get_size()) or {}
                calibrated[:] = [found.get(name, np.nan) for name in cost_model.NAMES]
            except Exception as exc:  # noqa: BLE001 - the other ranks wait in Bcast
                warnings.warn(f"{exc}; auto uses the default constants", stacklevel=2)
        comm.Bcast(calibrated, root=0)
        self.calibrated = tuple(calibrated.tolist())

    def wire(self, codec=None, blocking=None):
        """A :class:`Wire` for the next call; by default blocking when the ranks poll
        (which every rank decides alike, so their collectives match)."""
        self.calls += 1
        if blocking is None:
            blocking = not self.naps()
        beta = self.calibrated[cost_model.NAMES.index("beta")]
        return Wire(
            self.comm,
            blocking=blocking,
            sequence=self.calls - 1,
            codec=codec,
            beta=cost_model.BETA if beta != beta else beta,  # NaN: none stored
        )

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


def _unlink_node_memory():
    """Unlink the files of MPICH's shared memory that this process maps. The memory stays
    with the processes mapping it (every rank of the node, since MPI started) until they
    end; MPICH opens it by name only at the start, and ignores the missing name at the end.
    """
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[5:]
            if path and path[0].startswith("/dev/shm/mpich_shm_"):
                with contextlib.suppress(OSError):
                    os.unlink(path[0])


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
    """Wait for an MPI request to complete, as the collectives here wait on ``comm``.

    MPI's own wait, or on a node with more of the ranks of ``comm`` than cores (see
    :data:`collectives.thresholds.WAIT`), testing, then yielding the core, then napping
    between tests, so that a rank that is early does not take the core from one that
    shares it and is still working. On one rank, MPI's own wait (nothing waits for
    another rank).

    Parameters
    ----------
    request : mpi4py.MPI.Request
        The request of an operation on ``comm``, such as ``comm.Ibarrier()``.
    comm : mpi4py.MPI.Intracomm, optional
        The communicator the operation runs on; None (the default) means
        ``MPI.COMM_WORLD``. Where it has more than one rank and the collectives have not
        used it yet, every rank of it calls (they make their private duplicate of it).

    See Also
    --------
    iallreduce : Its ``Request.wait()`` waits the same way.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from collectives import wait
    >>> request = MPI.COMM_SELF.Ibarrier()
    >>> wait(request, MPI.COMM_SELF)
    >>> request == MPI.REQUEST_NULL  # completed and freed
    True
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    if comm.Get_size() > 1 and channel(comm).naps():
        test_until_done(request, comm)
    else:
        request.Wait()


def cost_constants(comm=None):
    """The cost model's constants that ``algorithm="auto"`` uses on ``comm``.

    Rank 0's stored calibration for this many ranks (:func:`cost_model.stored`), read when
    the collectives first use ``comm`` and broadcast; where it holds none of a constant
    (or rank 0 finds no record, or an unreadable file, which it warns of), the module
    attribute's value now (:data:`cost_model.ALPHA` and the like).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm, optional
        The communicator; None (the default) means ``MPI.COMM_WORLD``. On first use
        every rank of it calls.

    Returns
    -------
    dict
        ``{"alpha": ..., "beta": ..., "gamma": ..., "dense_gamma": ...}`` (the keys of
        :data:`cost_model.NAMES`), floats, the same on every rank.

    Raises
    ------
    TypeError
        If ``comm`` is not an mpi4py ``Intracomm``.

    See Also
    --------
    calibrate : Measure the constants.
    cost_model.store : Keep them for the collectives of later runs.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from collectives import cost_constants
    >>> constants = cost_constants(MPI.COMM_SELF)
    >>> list(constants)
    ['alpha', 'beta', 'gamma', 'dense_gamma']
    """
    calibrated = channel(comm).calibrated
    defaults = (cost_model.ALPHA, cost_model.BETA, cost_model.GAMMA, cost_model.DENSE_GAMMA)
    return {
        name: default if value != value else value
        for name, value, default in zip(cost_model.NAMES, calibrated, defaults, strict=True)
    }


def _as_input(vec, algorithm, out, quantization_bits, random_state):
    """Check the arguments of one rank; the vector as the algorithm wants it."""
    if algorithm not in ALGORITHM_CODES:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHM_CODES)}, got {algorithm!r}")
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


def check(error=None, comm=None):
    """Raise on every rank of ``comm`` if any rank passes an ``error``.

    A rendezvous of all ranks: the rank that passes an exception re-raises it, the others
    raise :class:`RankError` with its message. A rank may also pass its error while the
    others are in (or about to enter) any collective of this package: it meets them there,
    and they raise instead of waiting for it forever.

    Parameters
    ----------
    error : BaseException or None, default None
        This rank's failure, or None when it has none.
    comm : mpi4py.MPI.Intracomm, optional
        The communicator; None (the default) means ``MPI.COMM_WORLD``. Every rank of it
        calls (or is in another collective of this package).

    Raises
    ------
    BaseException
        ``error`` itself, on each rank that passed one.
    RankError
        On the ranks that passed None, when any rank passed an error (naming the highest
        such rank).
    TypeError
        If ``error`` is neither an exception nor None (on this rank alone).

    See Also
    --------
    RankError : What the other ranks raise.

    Examples
    --------
    Every rank reaches the same outcome, so none goes on alone:

    >>> from mpi4py import MPI
    >>> from collectives import check
    >>> error = None
    >>> try:
    ...     rows = int("seven")
    ... except ValueError as exc:
    ...     error = exc
    >>> check(error, MPI.COMM_SELF)
    Traceback (most recent call last):
        ...
    ValueError: invalid literal for int() with base 10: 'seven'
    >>> check(None, MPI.COMM_SELF)  # no rank failed: returns None
    """
    if error is not None and not isinstance(error, BaseException):
        raise TypeError(f"error must be an exception or None, got {type(error).__name__}")
    chan = channel(comm)
    wire = chan.wire()
    chan.run(agree(wire, SparseVector.empty(0), "auto", error, "check"))


def _steps(wire, vec, algorithm, out, bits, error, calibrated):
    """The whole allreduce as a generator: agreement, then the rest (:func:`_reduce`)."""
    max_nnz = yield from agree(wire, vec, algorithm, error, bits=bits)
    rest = _reduce(wire, vec, algorithm, out, max_nnz, calibrated)
    return (yield from past_agreement(wire, "allreduce", rest))


def _reduce(wire, vec, algorithm, out, max_nnz, calibrated):
    """An allreduce past its agreement: choice, algorithm, output form."""
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
    """Reduce to all: sum ``vec`` elementwise over all ranks of ``comm``.

    MPI ``Allreduce`` with ``MPI.SUM`` for vectors that may be sparse: every rank passes its
    vector, and every rank gets the sum, bitwise the same on all of them. The sparse
    algorithms send only the stored entries (indices and values); the sum may become dense
    on the way. Every call first checks, in one small collective, that no rank failed and
    that all ranks passed the same size, dtype, algorithm and quantization, so a wrong
    argument raises on every rank instead of hanging the others. A rank that fails after
    that check (out of memory, an MPI error, an interrupt), where the others wait for it
    inside the call, prints its error to stderr and aborts the job (``MPI_Abort``); on one
    rank it raises.

    Parameters
    ----------
    vec : SparseVector or ndarray
        This rank's vector: a :class:`SparseVector` or a dense 1-D float32 or float64
        array. Every rank passes one of the same size and dtype.
    comm : mpi4py.MPI.Intracomm, optional
        The communicator; None (the default) means ``MPI.COMM_WORLD``. Every rank of it
        calls. The call runs on a private duplicate of ``comm``, made on first use.
    algorithm : str, default "auto"
        One of :data:`collectives.ALGORITHMS`, the same on every rank:
        ``"ssar_recursive_double"`` (log2 P rounds of exchanging the partial sum; for few
        nonzeros), ``"ssar_split_allgather"`` (a sparse reduce-scatter of P index ranges,
        then an allgather of the reduced ranges; for more), ``"dsar_split_allgather"`` (as
        that, but a reduced range denser than :func:`thresholds.delta` travels dense), or
        ``"dense"`` (MPI ``Allreduce`` of the dense vector); or ``"auto"``: the fastest by
        :mod:`collectives.cost_model` for P, the size and the largest nonzero count of any
        rank, with the constants of :func:`cost_constants`.
    out : {"auto", "sparse", "dense"} or ndarray, default "auto"
        The form of the result: ``"sparse"`` a :class:`SparseVector`, ``"dense"`` an
        ndarray, ``"auto"`` the form the algorithm produced (``dense`` and a
        ``dsar_split_allgather`` that switched any range to dense give an ndarray). An
        ndarray of the vector's size and dtype (1-D, writeable, C-contiguous) receives the
        dense sum and is returned (no new array: with ``algorithm="dense"`` it may be
        ``vec`` itself, summed in place, as MPI's ``IN_PLACE``).
    stats : Stats, optional
        Accumulates the call's traffic, time and algorithm (:meth:`Stats.add`).
    quantization_bits : {None, 2, 4, 8}, default None
        The same on every rank. With bits, the values of the sparse algorithms and the
        dense blocks of ``dsar_split_allgather`` travel as QSGD codes
        (:func:`collectives.quantize`): the sum is then unbiased, not exact (``dense`` sums
        exactly). On one rank nothing is sent, so nothing is quantized.
    random_state : int, optional
        A non-negative integer, the same on every rank, that seeds the rounding of
        quantized values (each rank draws its own from it). None takes the call's number on
        the communicator instead, so a program that repeats its calls repeats its results.

    Returns
    -------
    SparseVector or ndarray
        The sum, with the dtype of ``vec``, in the form ``out`` asks for: a
        :class:`SparseVector` (its indices ``uint32`` when ``size < 2**32``, else
        ``uint64``; it may hold entries whose sum is zero) or a dense ndarray of ``size``
        entries (``out`` itself when ``out`` is an ndarray). With ``out="auto"`` a dense
        ``vec`` may give a sparse sum. On one rank, the sum is a copy of ``vec``.

    Raises
    ------
    TypeError
        If ``vec`` is neither a :class:`SparseVector` nor an ndarray or its values are not
        float32 or float64, or if ``comm`` is not an mpi4py ``Intracomm`` (this last on
        this rank alone, before any communication).
    ValueError
        If ``algorithm``, ``out``, ``quantization_bits`` or ``random_state`` is not one
        described above, or a dense ``vec`` is not 1-D; or if the ranks disagree on the
        size, dtype, algorithm or quantization_bits (then every rank raises it).
    RankError
        If another rank's arguments were wrong (that rank raises its own error), or another
        rank passed its error to :func:`check` instead of calling.

    See Also
    --------
    iallreduce : The same sum, started without waiting for it.
    allgather : Every rank's vector, not their sum.
    cost_model.choose : The algorithm ``"auto"`` picks.

    Examples
    --------
    On one rank the sum is the vector itself (a copy):

    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> from collectives import SparseVector, allreduce
    >>> vec = SparseVector([1, 4], np.array([0.5, -2.0], np.float32), 6)
    >>> total = allreduce(vec, MPI.COMM_SELF)
    >>> total
    SparseVector(size=6, nnz=2, dtype=float32)
    >>> total.indices.tolist(), total.values.tolist()
    ([1, 4], [0.5, -2.0])

    The form of the result follows the algorithm, or ``out``:

    >>> allreduce(vec, MPI.COMM_SELF, algorithm="dense").tolist()
    [0.0, 0.5, 0.0, 0.0, -2.0, 0.0]
    >>> allreduce(vec, MPI.COMM_SELF, algorithm="dense", out="sparse")
    SparseVector(size=6, nnz=2, dtype=float32)
    >>> buffer = np.empty(6, np.float32)
    >>> allreduce(vec, MPI.COMM_SELF, out=buffer) is buffer
    True
    >>> buffer.tolist()
    [0.0, 0.5, 0.0, 0.0, -2.0, 0.0]

    Run under ``mpiexec -n 4``, with ``comm=None`` (``MPI.COMM_WORLD``), each rank adds
    its own entries and all get the same sum:

    >>> comm = MPI.COMM_WORLD
    >>> mine = SparseVector([comm.rank], [1.0], comm.size + 1)
    >>> allreduce(mine, out="dense").tolist()  # doctest: +SKIP
    [1.0, 1.0, 1.0, 1.0, 0.0]
    """
    begin = time.perf_counter()
    chan = channel(comm)
    wire, steps = start(chan, vec, algorithm, out, quantization_bits, random_state)
    result, algorithm = chan.run(steps)
    record(stats, wire, algorithm, time.perf_counter() - begin)
    return result


def _gather_steps(wire, vec, error):
    yield from agree(wire, vec, "auto", error, "allgather")
    return (yield from past_agreement(wire, "allgather", _gather(wire, vec)))


def _gather(wire, vec):
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
    """Gather to all: the list of every rank's :class:`SparseVector`, in rank order.

    MPI ``Allgatherv`` of the counts, then of the indices and values: each rank may hold a
    different number of nonzeros. Like :func:`allreduce`, it first checks that no rank
    failed and that all ranks passed the same size and dtype.

    Parameters
    ----------
    vec : SparseVector or ndarray
        This rank's vector: a :class:`SparseVector`, or a dense 1-D float32 or float64
        array (its nonzero entries are sent, as :meth:`SparseVector.from_dense` finds them).
        Every rank passes one of the same size and dtype.
    comm : mpi4py.MPI.Intracomm, optional
        The communicator; None (the default) means ``MPI.COMM_WORLD``. Every rank of it calls.
    stats : Stats, optional
        Accumulates the call's traffic and time, as algorithm ``"allgather"``.

    Returns
    -------
    list of SparseVector
        ``comm.size`` vectors, rank ``r``'s at position ``r``, with the size, dtype and
        index dtype of ``vec``; the same on every rank.

    Raises
    ------
    TypeError
        If ``vec`` is neither a :class:`SparseVector` nor an ndarray or its values are not
        float32 or float64, or if ``comm`` is not an mpi4py ``Intracomm``.
    ValueError
        If a dense ``vec`` is not 1-D, or the ranks disagree on size or dtype.
    RankError
        If another rank's arguments were wrong (that rank raises its own error).

    See Also
    --------
    allreduce : The sum of every rank's vector.

    Examples
    --------
    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> from collectives import SparseVector, allgather
    >>> vec = SparseVector([1, 4], [0.5, -2.0], 6)
    >>> gathered = allgather(vec, MPI.COMM_SELF)
    >>> gathered
    [SparseVector(size=6, nnz=2, dtype=float64)]
    >>> gathered[0].indices.tolist(), gathered[0].values.tolist()
    ([1, 4], [0.5, -2.0])
    >>> allgather(np.array([0.0, 3.0, 0.0]), MPI.COMM_SELF)
    [SparseVector(size=3, nnz=1, dtype=float64)]
    """
    begin = time.perf_counter()
    chan = channel(comm)
    wire = chan.wire()
    error = None
    if isinstance(vec, np.ndarray):
        try:
            vec = SparseVector.from_dense(check_values(vec, "vec"))
        except (TypeError, ValueError) as exc:
            error = exc
    elif not isinstance(vec, SparseVector):
        error = TypeError(f"vec must be a SparseVector, got {type(vec).__name__}")
    result = chan.run(_gather_steps(wire, vec, error))
    record(stats, wire, "allgather", time.perf_counter() - begin)
    return result
