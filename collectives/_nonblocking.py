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
    """A started collective call: ``test()`` whether it is done, ``wait()`` for its result."""

    __slots__ = ("_done", "_result", "_error")

    def __init__(self):
        self._done = threading.Event()
        self._result = self._error = None

    def test(self):
        """Whether the call has completed (then ``wait()`` returns at once)."""
        return self._done.is_set()

    def wait(self):
        """The call's result; raises what the call raised (on every rank, as blocking calls
        do)."""
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
    """Start :func:`collectives.allreduce` and return a :class:`Request` at once.

    Takes the arguments of ``allreduce``; ``request.wait()`` returns what it would have
    returned, or raises on every rank what it would have raised. The call runs on the
    private duplicate of ``comm`` that the blocking collectives use, driven by a thread, so
    it goes on while the caller computes. Calls complete in the order they were started;
    a blocking collective started meanwhile on the same ``comm`` queues behind them. Leave
    ``vec`` unchanged and read ``stats`` only after ``wait()``. Needs MPI initialized with
    ``MPI_THREAD_MULTIPLE`` (mpi4py's default).
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
