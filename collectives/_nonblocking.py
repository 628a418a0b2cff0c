"""Non-blocking allreduce: a thread per communicator drives the calls, in order.

The steps of an algorithm (messages, then merges of what came, then more messages) need a
driver between MPI's own operations, so one progress thread per private channel runs the
started calls one after another, testing their requests and napping between tests; the
caller computes meanwhile, and waits on an event, which takes no CPU.
"""

import queue
import threading
import time

from mpi4py import MPI

from ._allreduce import channel, record, start
from ._wire import run

_CLOSE_SECONDS = 10.0  # how long freeing a channel waits for its thread to end


class Request:
    """A started collective call: ``test()`` whether it is done, ``wait()`` for its result.

    What :func:`collectives.iallreduce` returns; made there, not by the caller.

    See Also
    --------
    iallreduce : Start an allreduce.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from collectives import SparseVector, iallreduce
    >>> request = iallreduce(SparseVector([2], [1.0], 4), MPI.COMM_SELF)
    >>> request.wait()
    SparseVector(size=4, nnz=1, dtype=float64)
    >>> request.test()
    True
    """

    __slots__ = ("_done", "_result", "_error")

    def __init__(self):
        self._done = threading.Event()
        self._result = self._error = None

    def test(self):
        """Test for completion: whether the call has completed.

        Returns at once, without driving the call (a thread does).

        Returns
        -------
        bool
            True once the call has completed (then ``wait()`` returns at once, or
            raises).

        Examples
        --------
        >>> import time
        >>> from mpi4py import MPI
        >>> from collectives import SparseVector, iallreduce
        >>> request = iallreduce(SparseVector([2], [1.0], 4), MPI.COMM_SELF)
        >>> while not request.test():
        ...     time.sleep(0.001)  # compute meanwhile
        >>> request.wait().indices.tolist()
        [2]
        """
        return self._done.is_set()

    def wait(self):
        """Wait for completion: the call's result, or what it raised.

        Waits on an event, which takes no CPU. May be called again: it returns the same
        result (or raises the same error).

        Returns
        -------
        SparseVector or ndarray
            What the blocking call would have returned.

        Raises
        ------
        Exception
            What the call raised (on every rank, as blocking calls do): a ``TypeError`` or
            ``ValueError`` for wrong arguments, :class:`collectives.RankError` where
            another rank failed.

        Examples
        --------
        >>> from mpi4py import MPI
        >>> from collectives import SparseVector, iallreduce
        >>> request = iallreduce(SparseVector([2], [1.0], 4), MPI.COMM_SELF, algorithm="ring")
        >>> request.wait()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: algorithm must be one of [...], got 'ring'
        """
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result


class Progress:
    """The thread that drives the calls started on ``chan``, in the order they started."""

    def __init__(self, chan):
        self.comm = chan.comm
        self._calls = queue.SimpleQueue()
        self._count_lock = threading.Lock()
        self._pending = 0
        self._thread = threading.Thread(
            target=self._serve, name="collectives-progress", daemon=True
        )
        self._thread.start()

    def pending(self):
        """The number of calls started and not yet completed."""
        return self._pending

    def submit(self, steps, finish=None):
        """Queue the generator ``steps``; a :class:`Request` for its value (passed through
        ``finish`` when given)."""
        request = Request()
        with self._count_lock:
            self._pending += 1
        self._calls.put((request, steps, finish))
        return request

    def _serve(self):
        while (call := self._calls.get()) is not None:
            request, steps, finish = call
            try:
                result = run(steps, self.comm, nap=True)
                request._result = result if finish is None else finish(result)
            except BaseException as exc:  # noqa: BLE001 - raised by wait()
                request._error = exc
            with self._count_lock:
                self._pending -= 1
            request._done.set()

    def close(self):
        """End the thread once the calls queued before have completed."""
        self._calls.put(None)
        self._thread.join(_CLOSE_SECONDS)


def iallreduce(
    vec,
    comm=None,
    *,
    algorithm="auto",
    out="auto",
    stats=None,
    quantization_bits=None,
    random_state=None,
):
    """Nonblocking reduce to all: start :func:`collectives.allreduce`, return a request.

    Takes the arguments of ``allreduce``; ``request.wait()`` returns what it would have
    returned, or raises on every rank what it would have raised. The call runs on the
    private duplicate of ``comm`` that the blocking collectives use, driven by a thread, so
    it goes on while the caller computes. Calls complete in the order they were started;
    a blocking collective started meanwhile on the same ``comm`` queues behind them. Leave
    ``vec`` unchanged and read ``stats`` only after ``wait()``. Needs MPI initialized with
    ``MPI_THREAD_MULTIPLE`` (mpi4py's default).

    Parameters
    ----------
    vec : SparseVector or ndarray
        This rank's vector, as for :func:`allreduce`; left unchanged until the call
        completes.
    comm : mpi4py.MPI.Intracomm, optional
        The communicator; None (the default) means ``MPI.COMM_WORLD``. Every rank of it
        calls.
    algorithm : str, default "auto"
        As for :func:`allreduce`.
    out : {"auto", "sparse", "dense"} or ndarray, default "auto"
        As for :func:`allreduce`; an ndarray is written when the call completes.
    stats : Stats, optional
        Accumulates the call's traffic and time (from this call until it completes) when
        it completes.
    quantization_bits : {None, 2, 4, 8}, default None
        As for :func:`allreduce`.
    random_state : int, optional
        As for :func:`allreduce`.

    Returns
    -------
    Request
        The started call: ``test()`` whether it has completed, ``wait()`` for the sum
        (a :class:`SparseVector` or an ndarray, as :func:`allreduce` returns it).

    Raises
    ------
    RuntimeError
        If MPI was initialized with a thread level below ``MPI_THREAD_MULTIPLE``.
    TypeError
        If ``comm`` is not an mpi4py ``Intracomm``. Wrong other arguments are raised by
        ``wait()``, on every rank.

    See Also
    --------
    allreduce : The blocking call.
    wait : Wait for an MPI request as the collectives wait.

    Examples
    --------
    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> from collectives import SparseVector, iallreduce
    >>> vec = SparseVector([1, 4], np.array([0.5, -2.0], np.float32), 6)
    >>> request = iallreduce(vec, MPI.COMM_SELF, out="dense")
    >>> # ... compute here while the sum goes on ...
    >>> request.wait().tolist()
    [0.0, 0.5, 0.0, 0.0, -2.0, 0.0]
    """
    provided = MPI.Query_thread()
    if provided != MPI.THREAD_MULTIPLE:
        raise RuntimeError(
            "iallreduce needs MPI initialized with MPI_THREAD_MULTIPLE (mpi4py.rc.thread_level "
            f"= 'multiple', the default), got thread level {provided}"
        )
    begin = time.perf_counter()
    chan = channel(comm)
    if chan.progress is None:
        chan.progress = Progress(chan)
    wire, steps = start(chan, vec, algorithm, out, quantization_bits, random_state, blocking=False)

    def finish(value):
        result, chosen = value
        record(stats, wire, chosen, time.perf_counter() - begin)
        return result

    return chan.progress.submit(steps, finish)
