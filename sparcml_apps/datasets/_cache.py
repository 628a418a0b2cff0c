"""The CSR cache: ``indptr``, ``indices``, ``data`` and ``labels`` as ``.npy`` files and a
JSON manifest, written in a temporary directory renamed into place, read as memory maps."""

import ctypes
import json
import os
import queue
import shutil
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .._modes import set_default_mode

FORMAT = "sparcml-csr/1"
MANIFEST = "manifest.json"
INT32_MAX = 2**31 - 1
MAX_CLASSES = 1000
"""The manifest lists the distinct labels up to this many (else null: not classes)."""
_COPY_BLOCK = 1 << 24
SYNC_BYTES = 1 << 26
"""A file of the cache being written is sent to the disk every this many bytes, so that the
disk works while the rows are parsed (not all at the end, when the files are synced)."""
_SPOOLED = 8
"""Arrays queued for the writing thread at most."""


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


class _NpyWriter:
    """A 1-D ``.npy`` file appended to block by block; its length is written on exit, and
    it is synced to the disk then.

    Every :data:`SYNC_BYTES` appended start going to the disk meanwhile: without waiting
    where the system can (``sync_file_range``), else by syncing the file then.
    """

    def __init__(self, path, dtype):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = 0
        self.file = open(path, "wb")
        self.header = self._header()
        self.file.write(self.header)
        self.sent = len(self.header)  # the bytes started on their way to the disk

    def _header(self):
        fields = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": (self.length,),
        }
        with tempfile.TemporaryFile() as f:
            # numpy pads the header so that the shape can grow without moving the data
            np.lib.format.write_array_header_1_0(f, fields)
            f.seek(0)
            return f.read()

    def append(self, array):
        array = np.ascontiguousarray(array, self.dtype)
        self.file.write(memoryview(array).cast("B"))
        self.length += array.size
        if self._end() - self.sent >= SYNC_BYTES:
            self._send()

    def _end(self):
        """The file's length in bytes."""
        return len(self.header) + self.length * self.dtype.itemsize

    def _send(self):
        """Start the bytes not yet sent on their way to the disk."""
        self.file.flush()
        fd, end = self.file.fileno(), self._end()
        if _START_WRITEBACK is None or _START_WRITEBACK(
            fd, self.sent, end - self.sent, _SYNC_FILE_RANGE_WRITE
        ):
            os.fdatasync(fd)  # (also where sync_file_range fails)
        self.sent = end

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        with self.file:
            if kind is None:
                header = self._header()
                if len(header) != len(self.header):  # pragma: no cover - over 10**20 items
                    raise OverflowError(f"{self.path}: too many items for a .npy header")
                self.file.seek(0)
                self.file.write(header)
                self.file.flush()
                os.fsync(self.file.fileno())


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
            indptr, indices, data, labels = (
                stack.enter_context(_NpyWriter(tmp / f"{name}.npy", dtype))
                for name, dtype in (
                    ("indptr", np.int64),
                    ("indices", np.int32 if narrow else np.int64),
                    ("data", np.float64),
                    ("labels", np.float64),
                )
            )
            spool = stack.enter_context(_Spool())  # closed (written) before the files
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
                spool.put(indptr, nnz + np.cumsum(piece.row_nnz))
                nnz += int(piece.indices.size)
                spool.put(indices, piece.indices)
                spool.put(data, piece.values)
                spool.put(labels, piece.labels)
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


class _Spool:
    """A thread that appends arrays to their writers in the order given, while the caller
    goes on (parsing the next rows); an error it meets is raised by the next :meth:`put`
    or by :meth:`close`."""

    def __init__(self):
        self._jobs = queue.Queue(_SPOOLED)
        self._error = None
        self._thread = threading.Thread(target=self._serve, name="cache-writer", daemon=True)
        self._thread.start()

    def _serve(self):
        while (job := self._jobs.get()) is not None:
            if self._error is None:
                writer, array = job
                try:
                    writer.append(array)
                except BaseException as exc:  # noqa: BLE001 - raised by put() or close()
                    self._error = exc

    def put(self, writer, array):
        """Queue ``array`` (copied, in the writer's dtype) for ``writer``."""
        if self._error is not None:
            raise self._error
        self._jobs.put((writer, np.array(array, writer.dtype)))

    def close(self):
        """Wait until every queued array is written."""
        self._jobs.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
            return
        self._error = self._error or value  # drop what is left
        self._jobs.put(None)
        self._thread.join()


def _retype(path, dtype):
    """Rewrite the 1-D ``.npy`` file ``path`` with another dtype, block by block."""
    source = np.load(path, mmap_mode="r")
    retyped = path.with_suffix(".tmp")
    with _NpyWriter(retyped, dtype) as out:
        for start in range(0, source.size, _COPY_BLOCK):
            out.append(source[start : start + _COPY_BLOCK])
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
