"""Whether a rank's rows fit its memory, and the order of an epoch over rows that do not.

A rank trains on rows it holds in memory, shuffled over all of them, or, when its rows
are memory maps of a CSR cache larger than the memory it may use, out of core: the rows
are cut into blocks of consecutive rows, each epoch takes the blocks in a new order, a
window of :data:`WINDOW_BLOCKS` of them at a time, and shuffles the rows within each
window (so rows mix across blocks too). A window's rows are all the steps touch for a
while: a thread reads the next window while the steps take one, and the pages of the
window passed are dropped, from this process's memory and from the page cache. The order
comes from the epoch's seeded generator alone: a rerun gives the same model, bit for bit,
as long as the memory it may use (and so the block size) is the same.
"""

import logging
import mmap
import os
import threading
from pathlib import Path

import numpy as np

LOG = logging.getLogger(__name__)

LIMIT_VARIABLE = "SPARCML_MEMORY_LIMIT"
"""Environment variable: the bytes a node's ranks may use between them, instead of what
the cgroup and the machine allow."""
MODELS = 4
"""Copies of the model's size a rank holds besides its rows (its weights, the agreed
model, the exchange's buffers, the average)."""
SLACK = 500e6
"""Bytes a rank needs besides its rows and models: the interpreter and its libraries."""
WINDOW_BLOCKS = 8
"""Blocks whose rows are shuffled together, out of core."""
WINDOW_SHARE = 1 / 3
"""Out of core, the share of the memory left for rows that a window's rows take: the
steps' window and the next one, read ahead, take two thirds."""
LEAST_WINDOW = 64e6
"""Bytes of a window's rows, however little memory is left."""
READ_BYTES = 1 << 23
"""Out of core, the next window's rows are read ahead this many bytes at a time."""
_NO_LIMIT = 1 << 60  # cgroup v1 reports "no limit" as a number near 2**63


def limit():
    """The bytes this process may use: the least of its cgroup's memory limit (v1 or
    v2), the machine's memory, and :data:`LIMIT_VARIABLE` when set."""
    found = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    if os.environ.get(LIMIT_VARIABLE):
        found.append(int(float(os.environ[LIMIT_VARIABLE])))
    for path in _cgroup_limit_files():
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < _NO_LIMIT:
            found.append(int(text))
    return min(found)


def _cgroup_limit_files():
    """The memory limit files of this process's cgroups (v1 ``memory`` and v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    files = []
    for line in lines:
        _, controllers, where = line.split(":", 2)
        if controllers == "memory":
            files.append(Path("/sys/fs/cgroup/memory", where.lstrip("/"), "memory.limit_in_bytes"))
        elif controllers == "":
            files.append(Path("/sys/fs/cgroup", where.lstrip("/"), "memory.max"))
    return files


def file_backed(array):
    """Whether ``array``'s memory is a memory-mapped file (a view of a memmap too)."""
    while array is not None:
        if isinstance(array, np.memmap | mmap.mmap):
            return True
        array = getattr(array, "base", None)
    return False


def csr_bytes(X):
    """The bytes of the CSR matrix ``X``'s arrays."""
    return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes


def block_rows(X, n_weights, comm):
    """The rows of a block for an epoch out of core over this rank's rows ``X``, or 0 to
    shuffle them all in memory: they are in memory already (not file-backed), or they fit
    in this rank's share of :func:`limit` (the node's ranks share it alike) less
    :data:`MODELS` times the ``n_weights`` model and :data:`SLACK`. The choice is logged."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)  # (every rank of comm takes part)
    ranks = node.Get_size()
    node.Free()
    if X.shape[0] == 0 or not (file_backed(X.data) or file_backed(X.indices)):
        return 0
    share = limit() // ranks
    room = share - MODELS * 8 * n_weights - SLACK
    held = csr_bytes(X)
    where = f"rank {comm.Get_rank()}: {held / 1e6:,.0f} MB of rows (memory maps)"
    if held <= room:
        LOG.info("%s in %s MB of memory: trained in memory", where, f"{share / 1e6:,.0f}")
        return 0
    per_row = held / X.shape[0]
    window = max(room * WINDOW_SHARE, LEAST_WINDOW)
    rows = max(1, int(window / WINDOW_BLOCKS / per_row))
    LOG.info(
        "%s, more than the %s MB left of %s MB for rows: trained out of core, windows of "
        "%d blocks of %d rows (%s MB)",
        where, f"{room / 1e6:,.0f}", f"{share / 1e6:,.0f}", WINDOW_BLOCKS, rows,
        f"{WINDOW_BLOCKS * rows * per_row / 1e6:,.0f}",
    )  # fmt: skip
    return rows


def epoch_order(generator, n_rows, block_rows):
    """This epoch's order of ``n_rows`` rows from ``generator``, and where its windows
    start in it: a permutation of all of them (``block_rows`` 0: one window), or out of
    core the blocks of ``block_rows`` consecutive rows in a random order, the rows of each
    window of :data:`WINDOW_BLOCKS` blocks shuffled together. ``(order, starts,
    blocks)``: ``blocks[k]`` the first rows of window ``k``'s blocks (None in memory)."""
    if not block_rows or block_rows >= n_rows:
        return generator.permutation(n_rows), np.zeros(1, np.int64), None
    firsts = generator.permutation(-(-n_rows // block_rows)) * block_rows
    order = np.empty(n_rows, np.int64)
    starts, blocks = [], []
    at = 0
    for w in range(0, firsts.size, WINDOW_BLOCKS):
        window = firsts[w : w + WINDOW_BLOCKS]
        rows = np.concatenate([np.arange(b, min(b + block_rows, n_rows)) for b in window])
        order[at : at + rows.size] = generator.permutation(rows)
        starts.append(at)
        blocks.append(window)
        at += rows.size
    return order, np.array(starts, np.int64), blocks


class Windows:
    """Out of core, the rows ``X`` of an epoch's windows: a window's pages are asked of
    the disk while the steps take the one before, and a window's are let go once the
    steps are past it (so that what is read ahead is not what the system drops)."""

    def __init__(self, X, block_rows, blocks):
        self.indptr = np.asarray(X.indptr)
        self.block_rows = block_rows
        self.blocks = blocks
        self.maps = [m for m in (_Mapped.of(X.data), _Mapped.of(X.indices)) if m is not None]
        self.entered = -1
        self.reading = None  # the thread asking for the next window's pages

    def enter(self, k):
        """The steps reach window ``k``: the last one goes, and a thread reads the next
        one into the page cache while the steps take this one."""
        if k == self.entered:
            return
        self._wait()
        if self.entered < 0:  # what earlier passes left (checking the rows) goes first
            for window in range(len(self.blocks)):
                self._advise(window, "dontneed")
            self._advise(k, "willneed")  # (k > 0: an epoch resumed midway)
        elif k > 0:
            self._advise(k - 1, "dontneed")
        if k + 1 < len(self.blocks):
            self.reading = threading.Thread(target=self._advise, args=(k + 1, "willneed"))
            self.reading.start()
        self.entered = k

    def _wait(self):
        if self.reading is not None:
            self.reading.join()
            self.reading = None

    def close(self):
        """Let every window go."""
        self._wait()
        for k in range(len(self.blocks)):
            self._advise(k, "dontneed")
        for m in self.maps:
            m.close()

    def _advise(self, k, what):
        n_rows = self.indptr.size - 1
        for first in self.blocks[k]:
            lo = int(self.indptr[first])
            hi = int(self.indptr[min(first + self.block_rows, n_rows)])
            for m in self.maps:
                m.advise(what, lo, hi)


class _Mapped:
    """The file behind a memory-mapped array: ranges of its items read ahead, or let go
    from this process's memory and from the page cache (which, charged to the process's
    cgroup, would otherwise fill its limit until the system reclaims pages in the way of
    every read)."""

    def __init__(self, array, source):
        self.itemsize = array.itemsize
        at = array.ctypes.data - source.ctypes.data  # bytes from the memmap's first item
        self.file_offset = source.offset + at
        aligned = source.offset - source.offset % mmap.ALLOCATIONGRANULARITY
        self.map_offset = source.offset - aligned + at  # from the mapping's first byte
        self.mapping = source.base
        self.fd = os.open(source.filename, os.O_RDONLY)
        self.buffer = bytearray(READ_BYTES)  # for the reads ahead, one thread at a time
        # no read-around for faults, no readahead past the reads: what is not asked for
        # would fill the memory with rows of other windows (8 MB around a fault, here)
        self.mapping.madvise(mmap.MADV_RANDOM)
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)

    @classmethod
    def of(cls, array):
        source = array
        while source is not None and not (
            isinstance(source, np.memmap) and isinstance(source.base, mmap.mmap)
        ):
            source = getattr(source, "base", None)
        return None if source is None or not source.filename else cls(array, source)

    def advise(self, what, lo, hi):
        """Read items ``lo`` to ``hi - 1`` ahead, or let them go."""
        start, stop = lo * self.itemsize, hi * self.itemsize
        if stop <= start:
            return
        if what == "willneed":  # read (into the page cache) in large sequential reads
            for at in range(self.file_offset + start, self.file_offset + stop, READ_BYTES):
                os.preadv(self.fd, [memoryview(self.buffer)[: self.file_offset + stop - at]], at)
            return
        page = mmap.PAGESIZE  # whole pages inside the range only
        first = -(-(self.map_offset + start) // page) * page
        last = (self.map_offset + stop) // page * page
        if last > first:  # out of this process's memory, then out of the page cache
            self.mapping.madvise(mmap.MADV_DONTNEED, first, last - first)
            os.posix_fadvise(self.fd, self.file_offset + first - self.map_offset,
                             last - first, os.POSIX_FADV_DONTNEED)  # fmt: skip

    def close(self):
        os.close(self.fd)
