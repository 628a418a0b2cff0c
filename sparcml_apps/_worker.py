"""One worker of an ``n_jobs`` fit (:mod:`sparcml_apps.jobs`): a rank of its own MPI job.

Run as ``mpiexec -n N python -m sparcml_apps._worker SOCKET HEARTBEAT``. The worker
connects to the caller's socket, says which rank and process it is, and from then on
sends a heartbeat every ``HEARTBEAT`` seconds from a thread. It receives the estimator
and its block of rows, waits for the caller's go (every worker has its rows), starts MPI,
trains with the other workers over ``COMM_WORLD`` and ends with one message: its warnings
and, from worker 0, the fitted state, or from every worker the error that stopped them
all (:func:`collectives.check`). When the caller's end of the socket closes, the worker
removes the caller's folder (the socket's) and leaves at once.
"""

import faulthandler
import os
import shutil
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

import scipy.sparse as sp

import collectives

from .jobs import Link

GONE = 3
"""The exit code of a worker whose caller went away."""
POLL_SECONDS = 0.01
"""How often a worker that is done looks whether the others are (it does not spin)."""


class _Caller:
    """The link to the caller, and what to do once it is gone."""

    def __init__(self, address):
        self.folder = Path(address).parent
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(address)
        self.link = Link(sock)

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
            self.send(("beat",))

    def watch(self):
        """Read (and drop) whatever else comes, until the caller closes the socket."""
        try:
            while self.link.sock.recv(1 << 16):
                pass
        except OSError:
            pass
        self.gone()

    def task(self):
        """``(estimator, method, kwargs, block)`` from the caller, or the exception that
        prevented it; returns at the caller's go (every worker has its task)."""
        try:
            sys.path[:] = list(dict.fromkeys([*sys.path, *self.link.receive()]))
            task = self.link.receive()
        except (EOFError, ConnectionError):
            self.gone()
        except Exception as exc:  # noqa: BLE001 - every worker raises it, in _train
            task = exc
        try:
            self.link.receive()
        except (EOFError, OSError):
            self.gone()
        threading.Thread(target=self.watch, daemon=True).start()
        return task


def _train(caller, task, world):
    """Train on the task; the outcome to report (None from a worker other than 0)."""
    try:
        collectives.check(task if isinstance(task, Exception) else None, world)
        estimator, method, kwargs, (data, indices, indptr, shape, y, sample_weight) = task
        X = sp.csr_matrix((data, indices, indptr), shape=shape)
        estimator.comm = world
        caller.send(("ready",))
        getattr(estimator, method)(X, y, sample_weight=sample_weight, **kwargs)
    except collectives.RankError as exc:
        return ("error", exc.rank, exc.message)
    except Exception as exc:  # noqa: BLE001 - sent to the caller
        return ("error", world.Get_rank(), f"{type(exc).__name__}: {exc}")
    return ("result", estimator._fitted_state()) if world.Get_rank() == 0 else None


def main(address, heartbeat):
    faulthandler.enable()
    rank = int(os.environ["PMI_RANK"])
    caller = _Caller(address)
    caller.send(("hello", rank, os.getpid()))
    threading.Thread(target=caller.beat, args=(heartbeat,), daemon=True).start()
    # MPI starts once every worker has its task: its start holds the GIL (no heartbeat)
    # until all workers take part
    task = caller.task()
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    with warnings.catch_warnings(record=True) as caught:
        outcome = _train(caller, task, world)
    said = [(w.category, str(w.message)) for w in caught]
    try:
        caller.send(("end", said, outcome))
    except Exception as exc:  # noqa: BLE001 - a state that does not pickle
        caller.send(("end", said, ("error", rank, f"{type(exc).__name__}: {exc}")))
    done = world.Ibarrier()  # then every worker is done with MPI: leave without teardown
    while not done.Test():
        time.sleep(POLL_SECONDS)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
