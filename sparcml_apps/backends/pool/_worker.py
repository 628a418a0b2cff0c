"""One worker of a pool (:mod:`sparcml_apps.backends.pool`): a rank of the pool's own MPI
job.

Run as ``mpiexec -n N python -m sparcml_apps.backends.pool._worker SOCKET HEARTBEAT``.
The worker reads the pool's key from the file ``key`` beside the socket (in a folder
only its user may enter), connects, proves that it holds the key and checks the caller's
proof (:func:`._wire.handshake`), says which rank and process it is, starts MPI, loads
the training code (:data:`.limits.PRELOAD`) and sets numba's typing up
(:func:`~sparcml_apps.training.kernels.warm_up`), meets the others in a first collective
(after which a killed worker leaves nothing in ``/dev/shm``) and says it is up. Then it
fits, one task at a time, until the caller says ``close`` or goes away. A task comes as
two messages: the caller's ``sys.path``, then this worker's plan (a
:class:`~sparcml_apps.training.Plan`, which the caller's estimator made: no estimator,
nor scikit-learn, is loaded here), whose rows are views of shared memory the caller
filled (this worker opens it read-only and maps its block copy-on-write: no page is
copied). The worker says it is ready, trains with the others over ``COMM_WORLD``
(:func:`sparcml_apps.training.run`) and ends the task with one message: its warnings
and, from worker 0, what it trained (its arrays in shared memory in turn), or the error
that stopped every worker (:func:`collectives.check`). A worker that fails says so at
once (``failing``), before the others know: the caller ends the fit if they do not stop
with it (:data:`.limits.STRANDED_SECONDS`). While it fits, it sends a heartbeat every
``HEARTBEAT`` seconds. When the caller's end of the socket closes, the worker removes
the caller's folder and leaves at once.
"""

import faulthandler
import importlib
import os
import queue
import shutil
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

import collectives

from ... import training
from ...training import kernels
from . import limits
from ._wire import Link, handshake, unpack

GONE = 3
"""The exit code of a worker whose caller went away."""
POLL_SECONDS = 0.01
"""How often a worker that is closing looks whether the others are (it does not spin)."""


class _Caller:
    """The link to the caller: what it sends (read by a thread as it comes), the
    heartbeat, and what to do once it is gone."""

    def __init__(self, address):
        self.folder = Path(address).parent
        key = (self.folder / "key").read_bytes()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(address)
        handshake(sock, key, "worker")
        self.link = Link(sock)
        self.inbox = queue.Queue()
        self.busy = threading.Event()

    def gone(self):
        """Leave: the caller cannot take the folder away any more, so this worker does."""
        shutil.rmtree(self.folder, ignore_errors=True)
        os._exit(GONE)

    def send(self, message):
        try:
            self.link.send(message)
        except OSError:
            self.gone()

    def beat(self, seconds):
        while True:
            time.sleep(seconds)
            if self.busy.is_set():
                self.send(("beat",))

    def listen(self):
        """Queue what the caller sends, still pickled, until it closes the socket."""
        try:
            while True:
                self.inbox.put(self.link.receive_packed())
        except (EOFError, OSError):
            pass
        self.gone()

    def task(self):
        """The next task, this worker's :class:`~sparcml_apps.training.Plan`, or the
        exception that kept it from arriving (every worker raises it, in :func:`_train`);
        None at ``close``."""
        message = unpack(*self.inbox.get())
        if message[0] == "close":
            return None
        sys.path[:] = list(dict.fromkeys([*sys.path, *message[1]]))
        try:
            return unpack(*self.inbox.get())
        except Exception as exc:  # noqa: BLE001 - as the docstring says
            return exc


def _train(caller, plan, world):
    """Train on the plan; the outcome to report (None from a worker other than 0)."""
    try:
        collectives.check(plan if isinstance(plan, Exception) else None, world)
        caller.send(("ready",))
        trained = training.run(plan, world, failing=lambda exc: caller.send(_failing(exc)))
    except collectives.RankError as exc:
        return ("error", exc.rank, exc.message)
    except Exception as exc:  # noqa: BLE001 - sent to the caller
        return ("error", world.Get_rank(), f"{type(exc).__name__}: {exc}")
    return ("result", trained) if world.Get_rank() == 0 else None


def _failing(exc):
    """What a worker that failed tells the caller before the others know."""
    return ("failing", f"{type(exc).__name__}: {exc}")


def _serve(caller, world):
    """Fit task after task until the caller says ``close``."""
    while (plan := caller.task()) is not None:
        caller.busy.set()
        with warnings.catch_warnings(record=True) as caught:
            outcome = _train(caller, plan, world)
        del plan  # its rows and arrays: their shared memory goes with the last view
        said = [(w.category, str(w.message)) for w in caught]
        try:
            caller.send(("end", said, outcome))
        except Exception as exc:  # noqa: BLE001 - a state that does not pickle
            failed = ("error", world.Get_rank(), f"{type(exc).__name__}: {exc}")
            caller.send(("end", said, failed))
        del outcome
        caller.busy.clear()


def main(address, heartbeat):
    faulthandler.enable()
    rank = int(os.environ["PMI_RANK"])
    caller = _Caller(address)
    caller.send(("hello", rank, os.getpid()))
    threading.Thread(target=caller.listen, daemon=True).start()
    threading.Thread(target=caller.beat, args=(heartbeat,), daemon=True).start()
    from mpi4py import MPI  # starts MPI: every worker waits here for the others

    for name in limits.PRELOAD:  # loaded once, before the first task
        importlib.import_module(name)
    kernels.warm_up()  # numba's typing, set up while the caller packs the first rows

    world = MPI.COMM_WORLD
    collectives.check(comm=world)  # the first collective: MPICH's files are unlinked
    caller.send(("up",))
    _serve(caller, world)
    done = world.Ibarrier()  # then every worker is done with MPI: leave without teardown
    while not done.Test():
        time.sleep(POLL_SECONDS)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
