"""What the tests of ``n_jobs`` look at: processes, shared memory, a pool's sockets."""

import hashlib
import os
from pathlib import Path

from sparcml_apps import jobs


def digest(model):
    return hashlib.sha256(model.coef_.tobytes() + model.intercept_.tobytes()).hexdigest()


def descendants(pid):
    """Every process below ``pid``, zombies included."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(text[text.rindex(")") + 2 :].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def exists(pid):
    return Path(f"/proc/{pid}").exists()


def ended(pid):
    """Whether process ``pid`` has ended (a zombie, or gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text[text.rindex(")") + 2] == "Z"


def mapped_shm(pids):
    """The files in /dev/shm that the processes ``pids`` map (MPI's shared memory), also
    those already unlinked (``/proc`` adds " (deleted)" to their names)."""
    found = set()
    for pid in pids:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/dev/shm/"):
                found.add(Path(fields[5]))
    return found


def worker_folder(pid):
    """The caller's folder of a worker (that of its socket, on its command line)."""
    return Path(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[3].decode()).parent


def socket_bytes(n):
    """The bytes the pool of ``n`` workers has sent and received through its sockets
    since it started (0, 0 when it is closed)."""
    job = jobs.pool(n)._job
    if job is None:
        return 0, 0
    links = [peer.link for peer in job.peers.values()]
    return sum(link.sent for link in links), sum(link.received for link in links)
