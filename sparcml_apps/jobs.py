"""Fit on ``n_jobs`` local worker processes: an MPI job of their own, beside the caller.

The caller checks the data and starts ``mpiexec -n N python -m sparcml_apps._worker`` in a
session of its own. Every worker connects to a Unix socket of the caller, which sends it
the estimator and one contiguous block of rows (the block rank ``r`` of ``mpiexec -n N``
takes, :func:`row_blocks`) as raw array bytes read straight from ``X``: the caller makes
no copy of the data. The workers train together over their ``COMM_WORLD``; worker 0 sends
the fitted state back the same way (arrays raw, not pickled).

The caller never joins the MPI job, so nothing a worker does can end it. Every failure
raises :class:`collectives.RankError` naming the worker's rank: an exception in a worker,
with its message; a worker that dies (its socket closes), with how it ended (the signal
that killed it, or its exit code, as ``mpiexec`` reports); a worker that stops responding
(it sends a heartbeat every :data:`HEARTBEAT_SECONDS`), after :data:`SILENCE_SECONDS`. On
any failure, and on Ctrl-C, every worker is killed and reaped before the exception leaves.
What the workers print is copied to this process's ``sys.stdout`` and ``sys.stderr``.
"""

import codecs
import contextlib
import os
import pickle
import re
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import joblib
import numpy as np

import collectives

from . import _mpiexec

WORKER = "sparcml_apps._worker"
HEARTBEAT_SECONDS = 1.0
"""How often a worker tells the caller that it is alive."""
SILENCE_SECONDS = 10.0
"""A worker that sends nothing for this long has failed (stopped, or stuck)."""
START_SECONDS = 60.0
"""How long the workers have to start and connect."""
GRACE_SECONDS = 5.0
"""How long ``mpiexec`` has to end once its workers have (then it is killed)."""
POLL_SECONDS = 0.1
"""How often the waiting caller copies output and checks on the workers (it does not spin)."""


def row_blocks(n_rows, n_blocks):
    """The ``n_blocks + 1`` boundaries of contiguous, nearly equal blocks of rows."""
    return np.arange(n_blocks + 1) * n_rows // n_blocks


def workers(n_jobs):
    """How many processes ``n_jobs`` asks for: None is 1; -1 all cores, -2 all but one, ...
    (joblib's convention, at least 1)."""
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        return max(joblib.cpu_count() + 1 + n_jobs, 1)
    return n_jobs


def fit(estimator, method, X, y, *, sample_weight=None, timings=None, **kwargs):
    """Run ``estimator.<method>(X, y, ...)`` on ``workers(estimator.n_jobs)`` processes.

    The estimator changes only when the workers succeed (the check of the data, too, runs
    on the copy sent to them).

    A ``timings`` dict receives the seconds from the call to each stage: ``started`` (every
    worker connected), ``shipped`` (every block sent), ``first_step`` (every worker about to
    train), ``fitted`` (the fitted state received) and ``total``.
    """
    begin = time.monotonic()
    work = estimator._detached()  # checks the data and travels; the estimator waits
    X, y, weight, _, _ = work._validate_fit_data(
        X, y, sample_weight, reset=work._fresh(method == "partial_fit")
    )
    n = workers(estimator.n_jobs)
    task = (work, method, kwargs)
    try:  # fail here, before any process starts, on what cannot travel
        pickle.dumps(task, protocol=5, buffer_callback=[].append)
    except Exception as exc:
        raise TypeError(
            f"n_jobs={estimator.n_jobs} sends the estimator and the fit arguments to other "
            f"processes, but they cannot be pickled: {exc}"
        ) from exc
    bounds = row_blocks(X.shape[0], n)

    def task_of(rank):
        start, stop = bounds[rank], bounds[rank + 1]
        first, last = X.indptr[start], X.indptr[stop]
        block = (
            X.data[first:last],
            X.indices[first:last],
            X.indptr[start : stop + 1] - first,
            (stop - start, X.shape[1]),
            y[start:stop],
            None if sample_weight is None else weight[start:stop],
        )
        return (*task, block)

    with _Job(n) as job:
        state, caught = job.run(task_of, begin, timings)
    for category, message in caught:
        warnings.warn(message, category, stacklevel=5)  # at the caller of fit
    # what the check learnt (the width, the feature names) and what the workers fitted
    own = {"n_jobs": estimator.n_jobs, "comm": estimator.comm}
    estimator.__dict__.clear()
    estimator.__dict__.update({**work.__dict__, **state, **own})
    if timings is not None:
        timings["total"] = time.monotonic() - begin
    return estimator


class Link:
    """One end of a caller-worker socket: whole Python objects, their arrays as raw bytes.

    A message is a header (pickle length, number of buffers, buffer lengths), a pickle
    (protocol 5) and the out-of-band buffers of its contiguous arrays, sent from where
    they lie and received straight into new arrays. Sending is thread-safe.
    """

    _HEAD = struct.Struct("!QI")

    def __init__(self, sock):
        self.sock = sock
        self._lock = threading.Lock()

    def send(self, message):
        buffers = []
        data = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
        raws = [buffer.raw() for buffer in buffers]
        head = self._HEAD.pack(len(data), len(raws))
        sizes = struct.pack(f"!{len(raws)}Q", *(raw.nbytes for raw in raws))
        with self._lock:
            self.sock.sendall(head + sizes + data)
            for raw in raws:
                self.sock.sendall(raw)

    def receive(self):
        size, count = self._HEAD.unpack(self._fill(bytearray(self._HEAD.size)))
        sizes = struct.unpack(f"!{count}Q", self._fill(bytearray(8 * count)))
        data = self._fill(bytearray(size))
        return pickle.loads(data, buffers=[self._fill(np.empty(n, np.uint8)) for n in sizes])

    def _fill(self, buffer):
        view = memoryview(buffer).cast("B")
        while view.nbytes:
            received = self.sock.recv_into(view)
            if received == 0:
                raise EOFError("the other end closed the socket")
            view = view[received:]
        return buffer


class _Lost(Exception):
    """A worker's socket closed before it reported."""


class _Silent(Exception):
    """A worker sent nothing for too long."""


class _Launch(Exception):
    """The job did not start: ``mpiexec`` ended, or the workers did not connect in time."""


class _Peer:
    """The caller's side of one worker: its link, rank, pid and when it last spoke."""

    def __init__(self, sock):
        sock.settimeout(SILENCE_SECONDS)
        self.link = Link(sock)
        self.rank = self.pid = None
        self.seen = time.monotonic()


class _Job:
    """``mpiexec -n n`` workers: their socket, their output, and their end."""

    def __init__(self, n):
        self.n = n
        self.folder = Path(tempfile.mkdtemp(prefix="sparcml-jobs-"))
        self.selector = selectors.DefaultSelector()
        self.peers = {}  # by rank, once a worker said which it is
        self.ready = set()
        self.ended = {}  # rank -> (warnings, outcome)
        self.process = self.listener = None
        self.output = _Output(self.folder, n)
        self.oom_kills = _oom_kills()

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _start(self):
        address = str(self.folder / "socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(address)
        self.listener.listen(self.n)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        command = [
            _mpiexec.mpiexec(),
            "-n", str(self.n),
            "-disable-auto-cleanup",  # the caller ends the others, once it knows who failed
            "-print-all-exitcodes",
            "-outfile-pattern", str(self.folder / "out.%r"),
            "-errfile-pattern", str(self.folder / "err.%r"),
            sys.executable, "-m", WORKER, address, str(HEARTBEAT_SECONDS),
        ]  # fmt: skip
        with open(self.folder / "mpiexec.txt", "wb") as launcher:
            self.process = _mpiexec.start(
                command,
                env={"PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=launcher,
                stderr=subprocess.STDOUT,
            )

    def run(self, task_of, begin, timings):
        """Ship the tasks, wait for every worker's end; the fitted state and the warnings."""

        def stamp(stage):
            if timings is not None:
                timings[stage] = time.monotonic() - begin

        try:
            while len(self.ended) < self.n:
                self._step(task_of, stamp, begin)
                outcomes = [self.ended[rank][1] for rank in sorted(self.ended)]
                failed = [o for o in outcomes if o and o[0] == "error"]
                if failed:
                    self.stop()
                    raise collectives.RankError(*failed[0][1:])
        except _Lost as lost:
            raise self._lost(lost.args[0]) from None
        except _Silent as silent:
            raise self._silent(silent.args[0]) from None
        except _Launch as launch:
            raise self._launch(launch.args[0]) from None
        stamp("fitted")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(GRACE_SECONDS)
        caught = dict.fromkeys(w for rank in sorted(self.ended) for w in self.ended[rank][0])
        return self.ended[0][1][1], list(caught)

    def _step(self, task_of, stamp, begin):
        for key, _ in self.selector.select(POLL_SECONDS):
            if key.data is None:
                self._accept()
            else:
                self._receive(key.data, task_of, stamp)
        self.output.forward()
        now = time.monotonic()
        if len(self.peers) < self.n:
            if self.process.poll() is not None:
                raise _Launch(f"mpiexec ended with exit code {self.process.returncode}")
            if now - begin > START_SECONDS:
                raise _Launch(f"{len(self.peers)} of them connected within {START_SECONDS:g} s")
        quiet = [p for p in self.peers.values() if p.rank not in self.ended]
        quiet = [p for p in quiet if now - p.seen > SILENCE_SECONDS and not _waiting(p.link)]
        if quiet:
            raise _Silent(min(quiet, key=lambda p: p.seen))

    def _accept(self):
        with contextlib.suppress(BlockingIOError):
            sock, _ = self.listener.accept()
            self.selector.register(sock, selectors.EVENT_READ, _Peer(sock))

    def _receive(self, peer, task_of, stamp):
        try:
            message = peer.link.receive()
        except TimeoutError:  # stopped in the middle of a message
            raise _Silent(peer) from None
        except (EOFError, OSError):
            if peer.rank in self.ended:  # it left after its end, as it should
                self.selector.unregister(peer.link.sock)
                peer.link.sock.close()
                return
            if peer.rank is None:
                raise _Launch("a worker ended before it said which rank it is") from None
            raise _Lost(peer) from None
        peer.seen = time.monotonic()
        kind = message[0]
        if kind == "hello":
            peer.rank, peer.pid = message[1:]
            self.peers[peer.rank] = peer
            if len(self.peers) == self.n:
                stamp("started")
                self._ship(task_of)
                stamp("shipped")
        elif kind == "ready":
            self.ready.add(peer.rank)
            if len(self.ready) == self.n:
                stamp("first_step")
        elif kind == "end":
            self.ended[peer.rank] = message[1:]

    def _ship(self, task_of):
        """Send every worker its task, then the go to start MPI."""
        for rank, peer in sorted(self.peers.items()):
            self._send(peer, sys.path)
            self._send(peer, task_of(rank))
        for peer in self.peers.values():
            self._send(peer, ("go",))

    def _send(self, peer, message):
        try:
            peer.link.send(message)
        except TimeoutError:
            raise _Silent(peer) from None
        except OSError:
            raise _Lost(peer) from None

    # -- failures ---------------------------------------------------------------------

    def _lost(self, peer):
        self.stop()
        status = _exit_statuses(self.output.launcher()).get(peer.rank)
        how = f"its worker process (pid {peer.pid}) "
        if status is None:
            how += "ended without reporting"
        elif os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            how += f"was killed by signal {number} ({signal.Signals(number).name})"
            if number == signal.SIGKILL and _oom_kills() > self.oom_kills:
                how += (
                    "; the kernel's out-of-memory killer ended a process meanwhile, so it "
                    "most likely ran out of memory"
                )
        else:
            how += f"exited with code {os.waitstatus_to_exitcode(status)} before reporting"
            last = self.output.tail(peer.rank)
            how += f"; it printed last: {last}" if last else ""
        return collectives.RankError(peer.rank, how)

    def _silent(self, peer):
        state = _STATES.get(_process_state(peer.pid), "its state is unknown")
        seconds = time.monotonic() - peer.seen
        self.stop()
        return collectives.RankError(
            peer.rank,
            f"its worker process (pid {peer.pid}) sent no heartbeat for {seconds:.0f} s: "
            f"{state}; every worker was killed",
        )

    def _launch(self, what):
        self.stop()
        said = " ".join(self.output.launcher().split())[-600:]
        last = " | ".join(t for t in (self.output.tail(r) for r in range(self.n)) if t)
        return RuntimeError(
            f"n_jobs={self.n}: the workers did not start: {what}"
            + (f"; mpiexec printed: {said}" if said else "")
            + (f"; the workers printed: {last}" if last else "")
        )

    # -- the end ----------------------------------------------------------------------

    def stop(self):
        """Kill every worker, let ``mpiexec`` end (else kill it too) and reap it."""
        if self.process is None:
            return
        if self.process.poll() is None:
            pids = {p.pid for p in self.peers.values()} | _ranks(self.process.pid)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(GRACE_SECONDS)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def close(self):
        try:
            self.stop()
        finally:
            self.output.forward()
            self.output.close()
            for key in list(self.selector.get_map().values()):
                key.fileobj.close()
            self.selector.close()
            shutil.rmtree(self.folder, ignore_errors=True)


class _Output:
    """Copies what the workers write (to files ``out.R`` and ``err.R``) to ``sys.stdout``
    and ``sys.stderr`` as it comes."""

    def __init__(self, folder, n):
        self.folder = folder
        self.sources = [(f"{name}.{rank}", name) for rank in range(n) for name in ("out", "err")]
        self.files = {}
        self.decoders = {
            name: codecs.getincrementaldecoder("utf-8")("replace") for name, _ in self.sources
        }

    def forward(self):
        for name, stream in self.sources:
            if name not in self.files:
                path = self.folder / name
                if not path.exists():
                    continue
                self.files[name] = open(path, "rb")  # noqa: SIM115 - kept open until close
            text = self.decoders[name].decode(self.files[name].read())
            target = sys.stdout if stream == "out" else sys.stderr
            if text and target is not None:
                target.write(text)
                target.flush()

    def tail(self, rank, lines=3, width=300):
        """The last ``lines`` lines worker ``rank`` wrote to stderr (each cut to ``width``),
        on one line."""
        path = self.folder / f"err.{rank}"
        text = path.read_text(errors="replace") if path.exists() else ""
        last = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(line if len(line) <= width else line[:width] + "..." for line in last)

    def launcher(self):
        """What ``mpiexec`` itself printed."""
        path = self.folder / "mpiexec.txt"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self):
        for file in self.files.values():
            file.close()


_STATES = {
    "T": "it is stopped (as by SIGSTOP)",
    "t": "it is stopped by a debugger",
    "D": "it is waiting in the kernel (uninterruptible)",
    "R": "it is running but does not respond",
    "S": "it is sleeping but does not respond",
    "Z": "it has ended",
    None: "it no longer exists",
}


def _waiting(link):
    """Whether the socket of ``link`` holds something to read."""
    return bool(select.select([link.sock], [], [], 0)[0])


def _proc_stat(pid):
    """``(state, ppid, pgrp)`` of a process from ``/proc``, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
    return state, int(ppid), int(pgrp)


def _process_state(pid):
    stat = _proc_stat(pid)
    return stat and stat[0]


def _ranks(launcher):
    """The processes of ``launcher``'s process group other than it and its children (its
    proxies): the ranks, connected or not. Killed first, they are reaped by their proxy."""
    found = set()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != launcher:
                stat = _proc_stat(entry)
                if stat and stat[2] == launcher and stat[1] != launcher:
                    found.add(int(entry))
    return found


def _exit_statuses(text):
    """Each rank's wait status, from the ``Exit codes:`` line of ``-print-all-exitcodes``."""
    line = re.search(r"Exit codes: (.*)", text)
    if line is None:
        return {}
    groups = re.findall(r"\] ([\d,]+)", line.group(1))
    return dict(enumerate(int(code) for group in groups for code in group.split(",")))


def _oom_kills():
    """How many processes the kernel's out-of-memory killer has ended (0 if unknown)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    return 0
