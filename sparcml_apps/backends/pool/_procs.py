"""What a pool's caller knows of its worker processes (:mod:`sparcml_apps.backends.pool`): what
they print, how they ended, what state they are in, from ``/proc`` and ``mpiexec``."""

import codecs
import contextlib
import os
import re
import select
import sys
import time
from pathlib import Path


class Output:
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

    def aborted(self):
        """The workers that called ``MPI_Abort`` (MPICH says so on their stderr), in order
        of rank."""
        found = []
        for rank in range(len(self.sources) // 2):
            path = self.folder / f"err.{rank}"
            if path.exists() and _ABORTED in path.read_text(errors="replace"):
                found.append(rank)
        return found

    def launcher(self):
        """What ``mpiexec`` itself printed."""
        path = self.folder / "mpiexec.txt"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self):
        for file in self.files.values():
            file.close()


_ABORTED = "application called MPI_Abort"

STATES = {
    "T": "it is stopped (as by SIGSTOP)",
    "t": "it is stopped by a debugger",
    "D": "it is waiting in the kernel (uninterruptible)",
    "R": "it is running but does not respond",
    "S": "it is sleeping but does not respond",
    "Z": "it has ended",
    None: "it no longer exists",
}


def waiting(link):
    """Whether the socket of ``link`` holds something to read."""
    return bool(select.select([link.sock], [], [], 0)[0])


def proc_stat(pid):
    """``(state, ppid, pgrp)`` of a process from ``/proc``, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
    return state, int(ppid), int(pgrp)


def process_state(pid):
    stat = proc_stat(pid)
    return stat and stat[0]


def ranks(launcher):
    """The processes of ``launcher``'s process group other than it and its children (its
    proxies): the ranks, connected or not. Killed first, they are reaped by their proxy."""
    found = set()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != launcher:
                stat = proc_stat(entry)
                if stat and stat[2] == launcher and stat[1] != launcher:
                    found.add(int(entry))
    return found


def exit_statuses(text):
    """Each rank's wait status, from the ``Exit codes:`` line of ``-print-all-exitcodes``."""
    line = re.search(r"Exit codes: (.*)", text)
    if line is None:
        return {}
    groups = re.findall(r"\] ([\d,]+)", line.group(1))
    return dict(enumerate(int(code) for group in groups for code in group.split(",")))


def oom_kills():
    """How many processes the kernel's out-of-memory killer has ended (0 if unknown)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    return 0


def wait_gone(pids, seconds):
    """Wait (up to ``seconds``) until none of the processes ``pids`` is left in ``/proc``."""
    deadline = time.monotonic() + seconds
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
