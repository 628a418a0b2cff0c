"""The processes of one start of a pool (:mod:`sparcml_apps.backends.pool`): ``mpiexec -n N``
workers, their folder, socket and output, the fits they run, how they failed, their end.

The limits it keeps to are attributes of :mod:`.limits`.
"""

import contextlib
import logging
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import collectives

from ... import _mpiexec
from . import _procs, _wire, limits

LOG = logging.getLogger("sparcml_apps.backends.pool")


class _Lost(Exception):
    """A worker's socket closed before it reported."""


class _Silent(Exception):
    """A worker sent nothing for too long."""


class _Stranded(Exception):
    """A worker failed and the others did not stop with it in time."""


class _Launch(Exception):
    """The job did not start: ``mpiexec`` ended, or the workers did not come up in time."""


class _Peer:
    """The caller's side of one worker: its link, rank, pid and when it last spoke."""

    def __init__(self, sock):
        self.link = _wire.Link(sock)
        self.rank = self.pid = None
        self.seen = time.monotonic()


class Job:
    """``mpiexec -n n`` workers: their folder, socket, output, fits and end."""

    def __init__(self, n):
        self.n = n
        self.begin = time.monotonic()
        self.folder = Path(tempfile.mkdtemp(prefix="sparcml-jobs-"))  # mode 0700
        self.selector = selectors.DefaultSelector()
        self.peers = {}  # by rank, once a worker said which it is
        self.up = set()
        self.ready, self.ended, self.busy = set(), {}, False  # the fit that runs
        self.failing = {}  # by rank: what a worker that failed said, and when
        self.process = self.listener = None
        self.output = _procs.Output(self.folder, n)
        self.oom_kills = _procs.oom_kills()
        try:
            self._launch()
        except BaseException:
            self.close()
            raise

    def _launch(self):
        self.key = secrets.token_bytes(_wire.KEY_BYTES)
        descriptor = os.open(self.folder / "key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(descriptor, "wb") as file:
            file.write(self.key)
        address = str(self.folder / "socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(address)
        os.chmod(address, 0o600)
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
            sys.executable, "-m", limits.WORKER, address, str(limits.HEARTBEAT_SECONDS),
        ]  # fmt: skip
        with open(self.folder / "mpiexec.txt", "wb") as launcher:
            self.process = _mpiexec.start(
                command,
                env={"PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=launcher,
                stderr=subprocess.STDOUT,
            )

    def alive(self):
        """Whether the workers are all still there, as far as an idle pool can tell (one
        that is still starting is taken as alive: :meth:`run` checks its start)."""
        if len(self.up) < self.n:
            return True
        if any(_procs.process_state(p.pid) in ("Z", None) for p in self.peers.values()):
            return False
        try:
            for peer in self.peers.values():
                while _procs.waiting(peer.link):
                    peer.link.receive()  # a heartbeat sent as the last fit ended
        except (EOFError, OSError):
            return False
        return self.process.poll() is None

    def run(self, fd, packed, stamp):
        """Ship the tasks once every worker is up, wait for every worker's end; the
        fitted state and the warnings."""
        self.ready, self.ended, self.busy, self.failing = set(), {}, False, {}
        self.oom_kills = _procs.oom_kills()
        try:
            while len(self.up) < self.n:
                self._step()
            stamp("started")
            self._ship(fd, packed)
            stamp("shipped")
            while len(self.ended) < self.n:
                self._step(stamp)
                outcomes = [self.ended[rank][1] for rank in sorted(self.ended)]
                failed = [o for o in outcomes if o and o[0] == "error"]
                if failed:
                    self.stop()
                    raise collectives.RankError(*failed[0][1:])
        except _Lost as lost:
            raise self._lost(lost.args[0]) from None
        except _Silent as silent:
            raise self._silent(silent.args[0]) from None
        except _Stranded as stranded:
            raise self._stranded(*stranded.args) from None
        except _Launch as launch:
            raise self._launch_failed(launch.args[0]) from None
        self.busy = False
        stamp("fitted")
        # the fitted state is the caller's alone: a model it drops is freed then, not at
        # the start of the next fit
        ended, self.ended = self.ended, {}
        caught = dict.fromkeys(w for rank in sorted(ended) for w in ended[rank][0])
        return ended[0][1][1], list(caught)

    def _step(self, stamp=None):
        for key, _ in self.selector.select(limits.POLL_SECONDS):
            if key.data is None:
                self._accept()
            else:
                self._receive(key.data, stamp)
        self.output.forward()
        now = time.monotonic()
        if len(self.up) < self.n:
            if self.process.poll() is not None:
                raise _Launch(f"mpiexec ended with exit code {self.process.returncode}")
            if now - self.begin > limits.START_SECONDS:
                raise _Launch(f"{len(self.up)} of them were up within {limits.START_SECONDS:g} s")
        if self.busy:
            quiet = [p for p in self.peers.values() if p.rank not in self.ended]
            quiet = [p for p in quiet if now - p.seen > limits.SILENCE_SECONDS]
            quiet = [p for p in quiet if not _procs.waiting(p.link)]
            if quiet:
                raise _Silent(min(quiet, key=lambda p: p.seen))
            stranded = [
                (rank, message)
                for rank, (message, since) in sorted(self.failing.items())
                if rank not in self.ended and now - since > limits.STRANDED_SECONDS
            ]
            if stranded:
                raise _Stranded(*stranded[0])

    def _accept(self):
        with contextlib.suppress(BlockingIOError):
            sock, _ = self.listener.accept()
            sock.setblocking(True)
            sock.settimeout(limits.SILENCE_SECONDS)
            try:
                _wire.handshake(sock, self.key, "caller")
            except (OSError, EOFError) as exc:  # not one of the workers: refused
                LOG.warning("a connection to the workers' socket was refused: %s", exc)
                sock.close()
                return
            self.selector.register(sock, selectors.EVENT_READ, _Peer(sock))

    def _receive(self, peer, stamp):
        try:
            message = peer.link.receive()
        except TimeoutError:  # stopped in the middle of a message
            raise _Silent(peer) from None
        except (EOFError, OSError):
            if peer.rank is None:
                raise _Launch("a worker ended before it said which rank it is") from None
            raise _Lost(peer) from None
        peer.seen = time.monotonic()
        kind = message[0]
        if kind == "hello":
            peer.rank, peer.pid = message[1:]
            self.peers[peer.rank] = peer
            if len(self.peers) == self.n:  # every worker read the key
                (self.folder / "key").unlink(missing_ok=True)
        elif kind == "up":
            self.up.add(peer.rank)
        elif kind == "ready":
            self.ready.add(peer.rank)
            if len(self.ready) == self.n and stamp is not None:
                stamp("first_step")
        elif kind == "failing":
            self.failing.setdefault(peer.rank, (message[1], peer.seen))
        elif kind == "end":
            self.ended[peer.rank] = message[1:]

    def _ship(self, fd, packed):
        """Send every worker its task: this process's ``sys.path``, then the task."""
        self.busy = True
        for rank, peer in sorted(self.peers.items()):
            peer.seen = time.monotonic()
            try:
                peer.link.send(("path", sys.path))
                peer.link.send_packed(*packed[rank], fd)
            except TimeoutError:
                raise _Silent(peer) from None
            except OSError:
                raise _Lost(peer) from None

    # -- failures ---------------------------------------------------------------------

    def _lost(self, peer):
        self.stop()
        aborted = [rank for rank in self.output.aborted() if rank in self.peers]
        if aborted:  # the others ended with the job: the one that ended it says why
            peer = self.peers[aborted[0]]
            return collectives.RankError(
                peer.rank,
                f"its worker process (pid {peer.pid}) ended the MPI job (MPI_Abort); it "
                f"printed last: {self.output.tail(peer.rank)}",
            )
        status = _procs.exit_statuses(self.output.launcher()).get(peer.rank)
        how = f"its worker process (pid {peer.pid}) "
        if status is None:
            how += "ended without reporting"
        elif os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            how += f"was killed by signal {number} ({signal.Signals(number).name})"
            if number == signal.SIGKILL and _procs.oom_kills() > self.oom_kills:
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
        state = _procs.STATES.get(_procs.process_state(peer.pid), "its state is unknown")
        seconds = time.monotonic() - peer.seen
        self.stop()
        return collectives.RankError(
            peer.rank,
            f"its worker process (pid {peer.pid}) sent no heartbeat for {seconds:.0f} s: "
            f"{state}; every worker was killed",
        )

    def _stranded(self, rank, message):
        self.stop()
        others = sorted(set(self.peers) - set(self.failing) - set(self.ended))
        return collectives.RankError(
            rank,
            f"{message} (worker(s) {', '.join(map(str, others))} had not stopped with it "
            f"{limits.STRANDED_SECONDS:g} s later, and every worker was killed)",
        )

    def _launch_failed(self, what):
        self.stop()
        said = " ".join(self.output.launcher().split())[-600:]
        last = " | ".join(t for t in (self.output.tail(r) for r in range(self.n)) if t)
        return RuntimeError(
            f"n_jobs={self.n}: the workers did not start: {what}"
            + (f"; mpiexec printed: {said}" if said else "")
            + (f"; the workers printed: {last}" if last else "")
        )

    # -- the end ----------------------------------------------------------------------

    def stop(self, report=True):
        """Kill every worker, let ``mpiexec`` end (with ``report``, after it says how each
        worker ended, else told to at once: :func:`sparcml_apps._mpiexec.stop`) and reap
        it."""
        if self.process is None:
            return
        pids = {p.pid for p in self.peers.values()} | _procs.ranks(self.process.pid)
        if self.process.poll() is None:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(limits.GRACE_SECONDS if report else 0)
        _mpiexec.stop(self.process, limits.GRACE_SECONDS)
        # the workers of a killed launcher go to init, which reaps them: not even a zombie
        _procs.wait_gone(pids | _procs.ranks(self.process.pid), limits.GRACE_SECONDS)

    def close(self):
        """Tell idle workers to leave (the others are killed), then remove everything."""
        try:
            if len(self.up) == self.n and not self.busy and self.alive():
                for peer in self.peers.values():
                    with contextlib.suppress(OSError):
                        peer.link.send(("close",))
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(limits.GRACE_SECONDS)
            self.stop(report=False)
        finally:
            self.output.forward()
            self.forget()
            shutil.rmtree(self.folder, ignore_errors=True)

    def forget(self):
        """Close this process's ends (sockets, files), leaving the workers be."""
        self.output.close()
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()
