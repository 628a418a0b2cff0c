"""The CSR cache: ``indptr``, ``indices``, ``data`` and ``labels`` as ``.npy`` files and a
JSON manifest, written in a temporary directory renamed into place, read as memory maps."""

import ctypes
import errno
import fcntl
import json
import mmap
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from queue import SimpleQueue

import numpy as np
import scipy.sparse as sp

from .._modes import set_default_mode

FORMAT = "sparcml-csr/1"
MANIFEST = "manifest.json"
INT32_MAX = 2**31 - 1
MAX_CLASSES = 1000
"""The manifest lists the distinct labels up to this many (else null: not classes)."""
BLOCK_BYTES = 1 << 24
"""A file of the cache is written this many bytes at a time (a multiple of the page size)."""
_BLOCKS = 2
"""Blocks of memory a file being written holds: one filled while the other is written."""
_DIRECT = getattr(os, "O_DIRECT", 0)


def _writeback_starter():
    """Linux's ``sync_file_range`` (through the C library), which starts writing a range of
    a file to the disk and returns without waiting; None where there is none."""
    try:
        start = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError, TypeError):
        return None
    start.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    start.restype = ctypes.c_int
    return start


_START_WRITEBACK = _writeback_starter()
_SYNC_FILE_RANGE_WRITE = 2


class NpyWriter:
    """A 1-D ``.npy`` file appended to block by block; its length is written on exit, and
    it is synced to the disk then.

    What is appended is copied into a block of :data:`BLOCK_BYTES`; a full block is written
    by ``spool`` (an executor of one thread, so that the caller goes on meanwhile), or at
    once where there is none. Blocks go straight to the disk (``O_DIRECT``) where the file
    system allows: through the page cache, writing them can cost the kernel more CPU time
    than the disk takes, CPU that parsing needs. Elsewhere each block written starts on
    its way to the disk without waiting (``sync_file_range``), or is synced where the
    system cannot do that.
    """

    def __init__(self, path, dtype, spool=None):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = 0
        self.spool = spool
        self.error = None  # what a write in the spool met
        self.free = SimpleQueue()
        for _ in range(_BLOCKS):
            self.free.put(None)  # (allocated when first needed)
        self.header = self._header()
        self.block, self.used = self._take(), len(self.header)
        self.block[: self.used] = np.frombuffer(self.header, np.uint8)
        self.fd, self.direct = _create(path)

    def _header(self):
        fields = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": (self.length,),
        }
        with tempfile.TemporaryFile() as f:
            # numpy pads the header so that the shape can grow without moving the data, to
            # a multiple of 64 bytes: items never straddle blocks
            np.lib.format.write_array_header_1_0(f, fields)
            f.seek(0)
            return f.read()

    def append(self, array):
        array = np.asarray(array).ravel()
        size = self.dtype.itemsize
        done = 0
        while done < array.size:
            n = min(array.size - done, (BLOCK_BYTES - self.used) // size)
            room = self.block[self.used : self.used + n * size].view(self.dtype)
            np.copyto(room, array[done : done + n], casting="unsafe")
            done += n
            self.length += n
            self.used += n * size
            if self.used == BLOCK_BYTES:
                self._send()

    def _end(self):
        """The file's length in bytes: the header and the items appended."""
        return len(self.header) + self.length * self.dtype.itemsize

    def _send(self):
        """Write the full block, in the spool or now; go on in a free one."""
        block, nbytes, offset = self.block, self.used, self._end() - self.used
        if self.spool is None:
            self._write(block, nbytes, offset)
            self.free.put(block)
        else:
            self.spool.submit(self._write_and_free, block, nbytes, offset)
        self.block, self.used = self._take(), 0
        if self.error is not None:
            raise self.error

    def _take(self):
        block = self.free.get()  # (waits while both blocks are being written)
        return np.frombuffer(mmap.mmap(-1, BLOCK_BYTES), np.uint8) if block is None else block

    def _write_and_free(self, block, nbytes, offset):
        try:
            if self.error is None:
                self._write(block, nbytes, offset)
        except BaseException as exc:  # noqa: BLE001 - raised by the caller's next _take or exit
            self.error = exc
        finally:
            self.free.put(block)

    def _write(self, block, nbytes, offset):
        """Write ``block[:nbytes]`` at ``offset``; direct writes go on to the page's end (the
        file is cut to its length on exit)."""
        if not nbytes:
            return
        pages = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
        view, at = memoryview(block)[: pages if self.direct else nbytes], offset
        while view:
            try:
                done = os.pwrite(self.fd, view, at)
            except OSError as exc:
                if not (self.direct and exc.errno == errno.EINVAL):
                    raise
                self._through_page_cache()  # refused as not aligned as the disk wants
                view = view[: nbytes - (at - offset)]
                continue
            view, at = view[done:], at + done
        if not self.direct and (
            _START_WRITEBACK is None
            or _START_WRITEBACK(self.fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)
        ):
            os.fdatasync(self.fd)  # (also where sync_file_range fails)

    def _through_page_cache(self):
        fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) & ~_DIRECT)
        self.direct = False

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        try:
            if kind is not None and self.error is None:
                self.error = value  # the blocks still queued are not written
            for _ in range(_BLOCKS - 1):  # every block back but the one held: written
                self.free.get()
            if kind is None:
                if self.error is not None:
                    raise self.error
                self._write(self.block, self.used, self._end() - self.used)
                os.ftruncate(self.fd, self._end())
                header = self._header()
                if len(header) != len(self.header):  # pragma: no cover - over 10**20 items
                    raise OverflowError(f"{self.path}: too many items for a .npy header")
                self._through_page_cache()  # (a header is not a whole page)
                os.pwrite(self.fd, header, 0)
                os.fsync(self.fd)
        finally:
            os.close(self.fd)


def _create(path):
    """A new file ``path`` opened for writing: its descriptor, and whether its writes go
    straight to the disk (where the file system allows)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    if _DIRECT:
        try:
            return os.open(path, flags | _DIRECT, 0o666), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    return os.open(path, flags, 0o666), False


def write_cache(pieces, dest, *, n_features=None, info=None, check=None):
    """Write the rows of ``pieces`` (see ``iter_pieces``) as the CSR cache directory ``dest``.

    ``n_features`` None takes the largest column found. Indices and indptr are int32 when
    the column count and the nonzeros allow, else int64 (equal dtypes let scipy keep the
    memory maps as they are). ``info`` goes into the manifest, which is returned.
    ``check(manifest)``, if given, is called once every row is written: it may add to the
    manifest, or raise to refuse the cache. An existing cache is replaced only once the
    new one is complete; a failure or an interrupt leaves no trace.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        set_default_mode(tmp)
        narrow = n_features is None or n_features <= INT32_MAX
        with ExitStack() as stack:
            # the files are closed (each waits for its blocks) before the spool
            spool = stack.enter_context(ThreadPoolExecutor(1, "cache-writer"))
            indptr, indices, data, labels = (
                stack.enter_context(NpyWriter(tmp / f"{name}.npy", dtype, spool))
                for name, dtype in (
                    ("indptr", np.int64),
                    ("indices", np.int32 if narrow else np.int64),
                    ("data", np.float64),
                    ("labels", np.float64),
                )
            )
            nnz = 0
            max_column = -1
            classes = set()
            indptr.append(np.zeros(1, np.int64))
            for piece in pieces:
                if narrow and piece.max_column >= INT32_MAX:
                    raise ValueError(
                        f"n_features must be given for columns past {INT32_MAX}; "
                        f"found column {piece.max_column}"
                    )
                max_column = max(max_column, piece.max_column)
                indptr.append(nnz + np.cumsum(piece.row_nnz))
                nnz += int(piece.indices.size)
                indices.append(piece.indices)
                data.append(piece.values)
                labels.append(piece.labels)
                if classes is not None:
                    classes.update(np.unique(piece.labels).tolist())
                    classes = classes if len(classes) <= MAX_CLASSES else None
        if narrow and nnz > INT32_MAX:
            _retype(tmp / "indices.npy", np.int64)
        elif narrow:
            _retype(tmp / "indptr.npy", np.int32)
        manifest = {
            "format": FORMAT,
            "shape": [labels.length, max_column + 1 if n_features is None else int(n_features)],
            "nnz": nnz,
            "classes": None if classes is None else sorted(classes),
            **(info or {}),
        }
        if check is not None:
            check(manifest)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _install(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _retype(path, dtype):
    """Rewrite the 1-D ``.npy`` file ``path`` with another dtype, block by block."""
    source = np.load(path, mmap_mode="r")
    retyped = path.with_suffix(".tmp")
    step = BLOCK_BYTES // source.itemsize
    with NpyWriter(retyped, dtype) as out:
        for start in range(0, source.size, step):
            out.append(source[start : start + step])
    del source
    os.replace(retyped, path)


def _install(tmp, dest):
    """Move the finished directory ``tmp`` to ``dest``, replacing an older cache there."""
    if not dest.exists():
        os.rename(tmp, dest)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
    os.rename(dest, old / dest.name)
    os.rename(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def is_cache(path):
    """Whether ``path`` is a complete CSR cache directory."""
    return (Path(path) / MANIFEST).is_file()


def read_manifest(path):
    """The manifest of the cache ``path``, checked."""
    manifest_file = Path(path) / MANIFEST
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{manifest_file}: expected a CSR cache manifest: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise ValueError(f"{manifest_file}: expected format {FORMAT!r}; got {got!r}")
    return manifest


def read_cache(path, rows=None):
    """``(X, y, manifest)`` from the cache ``path``: memory maps, nothing read in advance.

    ``rows`` = (start, stop) takes that row range only (views, with a small copy of indptr).
    """
    path = Path(path)
    manifest = read_manifest(path)
    n_rows, n_features = manifest["shape"]
    arrays = {
        name: np.load(path / f"{name}.npy", mmap_mode="r")
        for name in ("indptr", "indices", "data", "labels")
    }
    expected = {
        "indptr": n_rows + 1,
        "indices": manifest["nnz"],
        "data": manifest["nnz"],
        "labels": n_rows,
    }
    for name, length in expected.items():
        if arrays[name].shape != (length,):
            raise ValueError(
                f"{path / name}.npy: expected {length} items as the manifest says; "
                f"found shape {arrays[name].shape}"
            )
    indptr, indices, data, labels = (arrays[k] for k in ("indptr", "indices", "data", "labels"))
    if rows is not None:
        start, stop = rows
        lo, hi = int(indptr[start]), int(indptr[stop])
        indptr = np.asarray(indptr[start : stop + 1]) - indptr.dtype.type(lo)
        indices, data, labels = indices[lo:hi], data[lo:hi], labels[start:stop]
        n_rows = stop - start
    X = sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_features), copy=False)
    return X, labels, manifest
