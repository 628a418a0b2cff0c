"""The socket between a pool's caller and its workers (:mod:`sparcml_apps.backends.pool`).

A connection opens with a handshake of raw bytes (:func:`handshake`): each end sends a
random challenge and answers the other's with an HMAC-SHA256 under the pool's key, the
two ends' answers told apart by role, so that neither can pass the other's answer back.
An end that answers wrongly is refused; nothing is unpickled before.

Then a message is a header, a pickle (protocol 5) and, when the message holds arrays, one
file descriptor passed with the header: a memfd (:func:`pack`), anonymous shared memory
holding the arrays' bytes, new and sealed against writes once they are in, or a file
without a name that the sender keeps and fills again for each message (:class:`Shelf`).
The receiver opens it read-only, maps the pages it needs copy-on-write, and the arrays
come out as views of that mapping: through the socket go the pickles of the messages,
their arrays never, and no name ever appears in ``/dev/shm`` or any folder. The memory
goes when the last process holding a mapping or a descriptor drops it, or ends.
"""

import array
import contextlib
import fcntl
import hashlib
import hmac
import io
import mmap
import os
import pickle
import secrets
import socket
import struct
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

KEY_BYTES = 32
"""Bytes of a pool's key."""
ALIGN = 64
"""Each array starts at a multiple of this many bytes of the shared memory."""
COPY_BYTES = 1 << 24
"""Arrays are copied into shared memory this many bytes at a time, on several threads."""
COPY_THREADS = 2
"""Threads that copy arrays into shared memory."""

_GREETING = b"sparcml-jobs 1\n"
_NONCE = 32
_HEAD = struct.Struct("!QIB")  # pickle bytes, arrays, whether a descriptor comes along
_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


class AuthenticationError(ConnectionError):
    """The other end of a socket did not prove that it holds the pool's key."""


def handshake(sock, key, role):
    """Prove to the other end of ``sock`` that this one holds ``key`` and check its proof.

    ``role`` is ``"caller"`` or ``"worker"``; raises :class:`AuthenticationError` if the
    other end is not the other role with the same key.
    """
    other = {"caller": "worker", "worker": "caller"}[role]
    challenge = secrets.token_bytes(_NONCE)
    sock.sendall(_GREETING + challenge)
    greeting = receive_exactly(sock, len(_GREETING) + _NONCE)
    if greeting[: len(_GREETING)] != _GREETING:
        raise AuthenticationError("the other end does not speak this protocol")
    sock.sendall(_answer(key, role, greeting[len(_GREETING) :]))
    if not hmac.compare_digest(receive_exactly(sock, 32), _answer(key, other, challenge)):
        raise AuthenticationError("the other end does not hold the pool's key")


def _answer(key, role, challenge):
    return hmac.new(key, role.encode() + b"\0" + challenge, hashlib.sha256).digest()


def receive_exactly(sock, n):
    """``n`` bytes from ``sock``; EOFError if it closes first."""
    buffer = bytearray(n)
    view = memoryview(buffer)
    while view.nbytes:
        received = sock.recv_into(view)
        if received == 0:
            raise EOFError("the other end closed the socket")
        view = view[received:]
    return bytes(buffer)


def pack(messages, shelf=None):
    """Pickle each of ``messages``; lay the bytes of their arrays in one memfd, each array
    once however many messages hold it: a new memfd, sealed against writes (the caller
    closes it), or that of ``shelf`` (:class:`Shelf`), filled again.

    Returns the memfd (None when no message holds an array) and, a message each, its
    pickle and the ``(offset, bytes)`` of its arrays in the memfd.
    """
    places, pieces, size, packed = {}, [], 0, []
    for message in messages:
        buffers, stream = [], io.BytesIO()
        _Pickler(stream, protocol=5, buffer_callback=buffers.append).dump(message)
        data, table = stream.getvalue(), []
        for buffer in buffers:
            raw = buffer.raw()
            key = (np.frombuffer(raw, np.uint8).ctypes.data, raw.nbytes)
            if key not in places:
                places[key] = size
                pieces.append((size, raw))
                size += -(-raw.nbytes // ALIGN) * ALIGN
            table.append((places[key], raw.nbytes))
        packed.append((data, table))
    if not pieces:
        return None, packed
    if shelf is None:
        fd = _filled(size, pieces, os.MFD_ALLOW_SEALING)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        return fd, packed
    return shelf.fill(size, pieces), packed


class _Pickler(pickle.Pickler):
    """Every array of numbers out of band: a strided one as a contiguous copy."""

    def reducer_override(self, obj):
        if isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
            if not (obj.flags.c_contiguous or obj.flags.f_contiguous):
                return np.ascontiguousarray(obj).__reduce_ex__(5)
        return NotImplemented


class Shelf:
    """Memory that this process fills again for every :func:`pack`, for others to map: a
    file it keeps, mapped, so that filling it again copies at the speed of memory (new
    pages cost more to fill than the copy). It grows to the largest pack so far;
    :meth:`close` frees it. The others must be done with one pack's arrays before the next.

    The others read the rows in a random order, and each read that misses the TLB waits
    for a walk of the page tables (in a virtual machine, of two sets of them): on 4 KiB
    pages the steps over url-like rows take 17% longer than on the 2 MiB pages of numpy's
    own arrays. So the file is one with huge pages where the machine gives them: an
    unnamed file (``O_TMPFILE``, mode 0600) in the temp directory
    (:func:`tempfile.gettempdir`), whose file system may hold its pages in 2 MiB folios
    (XFS; ext4 from Linux 6.16), which shared memory gets only where
    ``/sys/kernel/mm/transparent_hugepage/shmem_enabled`` allows it (``never`` is the
    kernel's default). Its mapping also asks for huge pages (``MADV_HUGEPAGE``). Rows
    that would pass the kernel's threshold for writing dirty pages back to disk in the
    background, or a temp directory that takes no such file, get a memfd instead; like
    any file's, the file's pages are written to its disk once 30 s old (``dirty_expire``),
    and freed with it."""

    def __init__(self):
        self.fd = self.memory = None

    def fill(self, size, pieces):
        """The file, holding each ``(offset, bytes)`` of ``pieces`` within ``size``."""
        if self.memory is None or size > len(self.memory):
            self.close()
            self.fd = _scratch(size)
            if not size:
                return self.fd
            self.memory = mmap.mmap(self.fd, size, mmap.MAP_SHARED)
            with contextlib.suppress(OSError):  # a kernel without huge pages refuses
                self.memory.madvise(mmap.MADV_HUGEPAGE)
        shelf = np.frombuffer(self.memory, np.uint8)
        _copy(pieces, lambda offset, view: _put(shelf, offset, view))
        return self.fd

    def close(self):
        if self.memory is not None:
            self.memory.close()
        if self.fd is not None:
            os.close(self.fd)
        self.fd = self.memory = None


def _scratch(size):
    """A new descriptor of ``size`` bytes that only this process holds: an unnamed file in
    the temp directory, its blocks taken (a full disk raises here, not as a SIGBUS when a
    write into its mapping finds no room), or else a memfd."""
    if 0 < size <= _clean_bytes():
        with contextlib.suppress(OSError):  # a file system without unnamed files
            fd = os.open(tempfile.gettempdir(), os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            except BaseException:
                os.close(fd)
                raise
            return fd
    return _memfd(size)


def _clean_bytes():
    """Bytes that files may still be written before the kernel starts writing dirty pages
    back to disk (``nr_dirty_background_threshold``); 0 where it does not say."""
    try:
        with open("/proc/vmstat") as lines:
            counts = dict(line.split() for line in lines)
        dirty = int(counts["nr_dirty_background_threshold"]) - int(counts["nr_dirty"])
    except (OSError, KeyError, ValueError):
        return 0
    return dirty * mmap.PAGESIZE


def _memfd(size, flags=0):
    """A new memfd of ``size`` bytes (zeros), with the memfd ``flags``."""
    fd = os.memfd_create("sparcml-jobs", os.MFD_CLOEXEC | flags)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _filled(size, pieces, flags=0):
    """A new memfd of ``size`` bytes holding each ``(offset, bytes)`` of ``pieces``."""
    fd = _memfd(size, flags)
    try:
        _copy(pieces, lambda offset, view: _write(fd, offset, view))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _copy(pieces, put):
    """``put(offset, bytes)`` each :data:`COPY_BYTES` of each ``(offset, bytes)`` of
    ``pieces``, on :data:`COPY_THREADS` threads."""
    chunks = [
        (offset + at, raw[at : at + COPY_BYTES])
        for offset, raw in pieces
        for at in range(0, raw.nbytes, COPY_BYTES)
    ]
    with ThreadPoolExecutor(COPY_THREADS) as threads:
        list(threads.map(lambda chunk: put(*chunk), chunks))


def _put(shelf, offset, view):
    shelf[offset : offset + view.nbytes] = np.frombuffer(view, np.uint8)


def _write(fd, offset, view):
    while view.nbytes:
        written = os.pwrite(fd, view, offset)
        offset, view = offset + written, view[written:]


def unpack(data, table, fd):
    """The message :func:`pack` made: its arrays views of private (copy-on-write)
    mappings of the pages of ``fd`` that hold them, and no others, opened read-only;
    closes ``fd``."""
    if fd is None:
        return pickle.loads(data)
    try:
        readonly = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
    try:
        views = _views(readonly, table)
    finally:
        os.close(readonly)
    return pickle.loads(data, buffers=views)


def _views(fd, table):
    """A view of each ``(offset, bytes)`` of ``table`` in ``fd``: one mapping for each run
    of them that no whole page parts."""
    views = [memoryview(bytearray())] * len(table)
    order = sorted((offset, n, i) for i, (offset, n) in enumerate(table) if n)
    while order:
        first = order[0][0] // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
        stop, count = 0, 0
        for offset, n, _ in order:
            if count and offset >= stop + mmap.ALLOCATIONGRANULARITY:
                break
            stop, count = max(stop, offset + n), count + 1
        memory = memoryview(mmap.mmap(fd, stop - first, access=mmap.ACCESS_COPY, offset=first))
        for offset, n, i in order[:count]:
            views[i] = memory[offset - first : offset - first + n]
        order = order[count:]
    return views


class Link:
    """One end of an authenticated caller-worker socket (after :func:`handshake`):
    messages of :func:`pack`. Sending is thread-safe; ``sent`` and ``received`` count the
    bytes that went through the socket."""

    def __init__(self, sock):
        self.sock = sock
        self.sent = self.received = 0
        self._lock = threading.Lock()

    def send(self, message):
        fd, ((data, table),) = pack([message])
        try:
            self.send_packed(data, table, fd)
        finally:
            if fd is not None:
                os.close(fd)

    def send_packed(self, data, table, fd=None):
        """Send a message :func:`pack` made, with its memfd ``fd``."""
        head = _HEAD.pack(len(data), len(table), fd is not None)
        head += struct.pack(f"!{2 * len(table)}Q", *(n for entry in table for n in entry))
        rights = []
        if fd is not None:
            rights.append((socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd])))
        with self._lock:
            sent = self.sock.sendmsg([head], rights)  # the descriptor rides on these bytes
            self.sock.sendall(head[sent:] + data)
            self.sent += len(head) + len(data)

    def receive(self):
        return unpack(*self.receive_packed())

    def receive_packed(self):
        """``(pickle, table, fd)`` of the next message, for :func:`unpack`."""
        head, fds = self._head()
        try:
            size, count, has_fd = _HEAD.unpack(head)
            if len(fds) != has_fd:
                raise ConnectionError(f"expected {has_fd} descriptor(s), received {len(fds)}")
            numbers = struct.unpack(f"!{2 * count}Q", receive_exactly(self.sock, 16 * count))
            data = receive_exactly(self.sock, size)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        self.received += _HEAD.size + 16 * count + size
        return data, list(zip(numbers[::2], numbers[1::2], strict=True)), (fds or [None])[0]

    def _head(self):
        """The fixed header and the descriptors passed with it."""
        buffer, fds = bytearray(_HEAD.size), []
        view = memoryview(buffer)
        space = socket.CMSG_SPACE(array.array("i").itemsize)
        while view.nbytes:
            received, ancillary, flags, _ = self.sock.recvmsg_into([view], space)
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.extend(array.array("i", payload[: len(payload) // 4 * 4]))
            if received == 0 or flags & socket.MSG_CTRUNC:
                for fd in fds:
                    os.close(fd)
                if received == 0:
                    raise EOFError("the other end closed the socket")
                raise ConnectionError("a descriptor sent along was lost")
            view = view[received:]
        return bytes(buffer), fds
