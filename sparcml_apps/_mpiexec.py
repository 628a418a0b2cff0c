"""Start Python modules on local MPI ranks with the ``mpiexec`` beside this interpreter."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

RANK_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
GRACE_SECONDS = 5.0
"""How long ``mpiexec`` has to end its ranks when asked to (:func:`stop`)."""
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""The signals that end this process, which :func:`unwinding` turns into an exception."""


class Terminated(SystemExit):
    """Raised by SIGTERM or SIGHUP within :func:`unwinding` (:func:`run` stops its job
    first): this process exits as the signal would have ended it (128 + its number)."""

    def __init__(self, signum):
        super().__init__(128 + signum)
        self.signal = signal.Signals(signum)


def mpiexec():
    """The ``mpiexec`` of this environment (the venv's, from the mpich wheel), else PATH's."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError(
            "mpiexec not found beside the Python interpreter or on PATH; "
            "install the 'mpich' wheel (pip install mpich)"
        )
    return found


def run_module(nprocs, module, args=(), *, env=None, timeout=None, capture=True):
    """Run ``python -m module args`` on ``nprocs`` ranks; the completed process.

    On a timeout every rank is killed and ``subprocess.TimeoutExpired`` raised.
    """
    command = [mpiexec(), "-n", str(nprocs), sys.executable, "-m", module, *map(str, args)]
    return run(command, env=env, timeout=timeout, capture=capture)


def start(command, *, env=None, **popen):
    """Start an ``mpiexec`` ``command`` with :data:`RANK_ENV` and ``env`` in a session of its
    own (one process group: :func:`stop` reaches every process it starts)."""
    environment = {**os.environ, **RANK_ENV, **(env or {})}
    return subprocess.Popen(command, env=environment, start_new_session=True, **popen)


def run(command, *, env=None, timeout=None, capture=True):
    """Run an ``mpiexec`` ``command`` with :data:`RANK_ENV` and ``env``; the completed process.

    On a timeout every process it started is killed and ``subprocess.TimeoutExpired`` raised.
    The job runs in a session of its own, which no signal to this process reaches: on
    Ctrl-C (``KeyboardInterrupt``) and on :data:`ENDING_SIGNALS` (:func:`unwinding`) it
    is stopped before the exception leaves.
    """
    output = subprocess.PIPE if capture else None
    with (
        unwinding(),
        start(command, env=env, stdout=output, stderr=output, text=True) as process,
    ):
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except BaseException:
            stop(process)
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def stop(process, seconds=GRACE_SECONDS):
    """End the job that ``process`` (from :func:`start`) runs and reap it: ``mpiexec`` is
    asked to end (SIGTERM: it kills its ranks and removes its files), and whatever is left
    of its session after ``seconds`` is killed."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(seconds)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def unwinding():
    """Within: :data:`ENDING_SIGNALS` raise :class:`Terminated`, so that ``with`` blocks and
    ``finally`` clauses clean up (in the main thread only, where Python runs handlers; not
    the signals this process ignores, nor those whose handlers Python did not set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        raise Terminated(signum)

    handlers = {n: signal.getsignal(n) for n in ENDING_SIGNALS}
    kept = {n: h for n, h in handlers.items() if h not in (signal.SIG_IGN, None)}
    for signum in kept:
        signal.signal(signum, terminated)
    try:
        yield
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)
