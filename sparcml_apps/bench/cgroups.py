"""Memory limits for benchmarks and tests: a cgroup v1 memory group of this project's own.

``limited(bytes)`` makes a group under ``/sys/fs/cgroup/memory`` (root only) with that
limit, for processes to join (``group.join`` as a ``preexec_fn``), and removes it after;
``evict(path)`` drops a file's (or a folder's files') pages from the page cache, so that a
limited process reads them again into memory charged to its group.
"""

import os
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/memory")
WHY_NOT = "needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory"
_GONE_SECONDS = 10.0  # how long removing a group waits for its processes to end


def available():
    """Whether memory groups can be made here."""
    return ROOT.is_dir() and os.access(ROOT, os.W_OK) and os.geteuid() == 0


class Group:
    """A memory cgroup: processes join it; its peak use (page cache included) is kept."""

    def __init__(self, path):
        self.path = path

    def join(self):
        """Move the calling process into the group (its children follow)."""
        (self.path / "cgroup.procs").write_text(f"{os.getpid()}\n")

    def peak(self):
        """The most memory the group has held, in bytes (its processes' and page cache)."""
        return int((self.path / "memory.max_usage_in_bytes").read_text())


@contextmanager
def limited(limit):
    """A :class:`Group` of ``limit`` bytes, removed when the block ends."""
    if not available():
        raise RuntimeError(f"a memory limit {WHY_NOT}")
    path = ROOT / f"sparcml-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir()
    try:
        (path / "memory.limit_in_bytes").write_text(f"{int(limit)}\n")
        yield Group(path)
    finally:
        deadline = time.monotonic() + _GONE_SECONDS
        while (path / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        (path / "memory.force_empty").write_text("0\n")
        path.rmdir()


def evict(path):
    """Drop the pages of the file ``path``, or of every file in the folder ``path``, from
    the page cache (written pages are synced first)."""
    path = Path(path)
    for file in sorted(path.iterdir()) if path.is_dir() else [path]:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
