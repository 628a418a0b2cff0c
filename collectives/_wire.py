"""The MPI calls of one collective operation, counted, blocking or not.

Algorithms are generators that start MPI operations through a :class:`Wire` and yield what
must finish before they go on: ``None`` (nothing), a request or a list of requests, or a
:class:`Probe`. One driver waits on them (blocking calls), another tests them (requests).
"""

import os
import time

import numpy as np
from mpi4py import MPI

from . import thresholds
from ._codec import EXACT

_MPI_TYPES = {
    np.dtype(np.float32): MPI.FLOAT,
    np.dtype(np.float64): MPI.DOUBLE,
    np.dtype(np.uint32): MPI.UINT32_T,
    np.dtype(np.uint64): MPI.UINT64_T,
    np.dtype(np.int64): MPI.INT64_T,
    np.dtype(np.uint8): MPI.BYTE,
}

TAGS_PER_CALL = 8
_TAG_CYCLE = 2048  # calls before tags repeat; far more than can be outstanding


def mpi_type(dtype):
    return _MPI_TYPES[np.dtype(dtype)]


def ceil_log2(n):
    return (n - 1).bit_length()


def displacements(counts):
    """Exclusive prefix sum of ``counts``."""
    displs = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=displs[1:])
    return displs


class Probe:
    """A pending match of the next message from ``source`` with ``tag``."""

    __slots__ = ("source", "tag", "message", "status")

    def __init__(self, source, tag):
        self.source, self.tag = source, tag
        self.message, self.status = None, MPI.Status()

    def wait(self, comm):
        self.message = comm.Mprobe(self.source, self.tag, self.status)

    def test(self, comm):
        self.message = comm.Improbe(self.source, self.tag, self.status)
        return self.message is not None

    def count(self, dtype):
        return self.status.Get_count(mpi_type(dtype))


class Wire:
    """Start the MPI operations of one collective call on ``comm`` and count their traffic.

    ``codec`` (:mod:`collectives._codec`) says how the values the algorithms send travel;
    ``beta``, the seconds a byte takes to send, whether their indices travel as bitmaps
    (:func:`collectives.thresholds.sends_bitmap`).
    """

    def __init__(self, comm, *, blocking, beta, sequence=0, codec=None):
        self.comm = comm
        self.codec = EXACT if codec is None else codec
        self.beta = beta
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self.blocking = blocking
        self.tag = (sequence % _TAG_CYCLE) * TAGS_PER_CALL
        self.bytes_sent = 0
        self.bytes_received = 0
        self.messages = 0

    def _call(self, blocking_call, nonblocking_call, *args, nonblocking=False):
        if self.blocking and not nonblocking:
            blocking_call(*args)
            return None
        return nonblocking_call(*args)

    def allreduce(self, sendbuf, recvbuf, op, *, nonblocking=False):
        """Reduce ``sendbuf`` into ``recvbuf`` on every rank; with ``nonblocking``, as a
        non-blocking collective whatever the wire's mode (MPI never matches a blocking
        collective with a non-blocking one, so a call that non-blocking calls on other ranks
        may meet must be one)."""
        moved = 2 * (self.size - 1) * recvbuf.nbytes // self.size
        self.bytes_sent += moved
        self.bytes_received += moved
        self.messages += 2 * ceil_log2(self.size)
        return self._call(
            self.comm.Allreduce, self.comm.Iallreduce, sendbuf, recvbuf, op, nonblocking=nonblocking
        )

    def bcast(self, buf, root, *, nonblocking=False):
        """Broadcast ``buf`` from ``root`` (``nonblocking`` as for :meth:`allreduce`)."""
        if self.rank == root:
            self.bytes_sent += buf.nbytes * (self.size - 1)
            self.messages += self.size - 1
        else:
            self.bytes_received += buf.nbytes
        return self._call(self.comm.Bcast, self.comm.Ibcast, buf, root, nonblocking=nonblocking)

    def allgather(self, sendbuf, recvbuf):
        """Gather equal blocks from every rank."""
        self._count_gather(sendbuf.nbytes, recvbuf.nbytes - sendbuf.nbytes)
        return self._call(self.comm.Allgather, self.comm.Iallgather, sendbuf, recvbuf)

    def allgatherv(self, sendbuf, recvbuf, counts):
        """Gather blocks of ``counts[r]`` items from every rank ``r``."""
        item = recvbuf.itemsize
        self._count_gather(sendbuf.nbytes, (int(counts.sum()) - int(counts[self.rank])) * item)
        spec = [recvbuf, (counts, displacements(counts)), mpi_type(recvbuf.dtype)]
        return self._call(self.comm.Allgatherv, self.comm.Iallgatherv, sendbuf, spec)

    def _count_gather(self, own, others):
        self.bytes_sent += own * (self.size - 1)
        self.bytes_received += others
        self.messages += self.size - 1

    def isend(self, buf, dest, tag):
        """Start sending ``buf`` to ``dest``."""
        self.bytes_sent += buf.nbytes
        self.messages += 1
        return self.comm.Isend([buf, mpi_type(buf.dtype)], dest, self.tag + tag)

    def irecv(self, buf, source, tag):
        """Start receiving ``buf`` from ``source``."""
        self.bytes_received += buf.nbytes
        return self.comm.Irecv([buf, mpi_type(buf.dtype)], source, self.tag + tag)

    def probe(self, source, tag):
        """A :class:`Probe` for the next message from ``source``; yield it to wait."""
        return Probe(source, self.tag + tag)

    def irecv_probed(self, probe, buf):
        """Start receiving the message ``probe`` matched into ``buf``."""
        self.bytes_received += buf.nbytes
        return probe.message.Irecv([buf, mpi_type(buf.dtype)])


def _pending(item):
    """The requests of a yielded item, or None when there is nothing to wait for."""
    if isinstance(item, Probe | MPI.Request):
        return item
    requests = [request for request in item or () if request is not None]
    return requests or None


def _done(pending, comm):
    if isinstance(pending, Probe):
        return pending.test(comm)
    if isinstance(pending, MPI.Request):
        return pending.Test()
    return MPI.Request.Testall(pending)


def _wait(pending, comm):
    if isinstance(pending, Probe):
        pending.wait(comm)
    elif isinstance(pending, MPI.Request):
        pending.Wait()
    else:
        MPI.Request.Waitall(pending)


def run(steps, comm, *, nap):
    """Drive the generator ``steps`` to its return value.

    Without ``nap``, waits are MPI's own (which poll the whole time). With ``nap``, a wait
    tests for ``thresholds.SPIN_SECONDS``, then yields the core between tests
    (``os.sched_yield``) until it has lasted ``thresholds.YIELD_SECONDS``, then naps between
    tests, so a rank that waits long leaves its core to the ranks that work:
    ``thresholds.NAP_SECONDS`` at first, each nap twice the last up to
    ``thresholds.LONGEST_NAP_SECONDS``. A wait that fails (an MPI error, an interrupt)
    raises in ``steps``, at the step that yielded what it waited for.
    """
    try:
        item = next(steps)
        while True:
            try:
                pending = _pending(item)
                if pending is not None and not nap:
                    _wait(pending, comm)
                elif pending is not None and not _done(pending, comm):
                    test_until_done(pending, comm)
            except BaseException as exc:  # noqa: BLE001 - raised where the step waited
                item = steps.throw(exc)
                continue
            item = next(steps)
    except StopIteration as stop:
        return stop.value


def test_until_done(pending, comm):
    """Test ``pending`` (a request, a list of them, or a :class:`Probe`) until it is done:
    for ``thresholds.SPIN_SECONDS``, then yielding the core between tests, then napping
    (:func:`run` with ``nap``)."""
    begin = time.perf_counter()
    seconds = thresholds.NAP_SECONDS
    while not _done(pending, comm):
        waited = time.perf_counter() - begin
        if waited > thresholds.YIELD_SECONDS:
            time.sleep(seconds)
            seconds = min(2 * seconds, thresholds.LONGEST_NAP_SECONDS)
        elif waited > thresholds.SPIN_SECONDS:
            os.sched_yield()
