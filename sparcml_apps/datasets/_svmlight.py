"""LIBSVM/svmlight text to CSR rows, by the numba kernels of ``_svmlight_kernels``.

A line is ``label [qid:N] index:value ...`` with 1-based increasing indices; ``#`` starts a
comment, blank lines are skipped, spaces, tabs and ``\\r`` separate tokens. The kernel
converts numbers exactly as ``float()`` does; the few it leaves (subnormals, inf, nan,
rounding ties within its precision, more than 19 digits that it cannot settle) are
converted by ``float()`` itself.

Text comes as a stream read in blocks (``iter_pieces``, ``read_all``: compressed data,
conversion to the cache), a thread reading the next block while this one is parsed, or as
a plain file mapped into memory (``read_file``); the lines of a block (``iter_pieces``) or
of the file are split over threads that parse at once.
"""

import gc
import lzma
import mmap
import os
import queue
import tarfile
import threading
import zlib
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

import numba
import numpy as np

from . import _svmlight_kernels as kernels
from ._cache import INT32_MAX
from ._errors import ParseError

CHUNK_BYTES = 1 << 24
"""Bytes read at a time from a stream; a block is parsed up to its last line end."""
THREAD_BYTES = 1 << 23
"""The least text worth a thread of its own."""

_ROWS, _NNZ, _SLOW = 1 << 18, 1 << 22, 1 << 14  # first capacities of the output buffers
_BYTES_PER_NONZERO = 7  # url-like text takes about 8; more room costs only address space
_READ_ERRORS = (OSError, EOFError, lzma.LZMAError, tarfile.TarError, zlib.error)

_MESSAGES = {
    kernels.BAD_LABEL: "expected a number as the label, got {token!r}",
    kernels.BAD_PAIR: "expected index:value, got {token!r}",
    kernels.BAD_VALUE: "expected a number after the index, got {token!r}",
    kernels.ZERO: "feature index 0 in {token!r}: LIBSVM indices start at 1",
    kernels.RANGE: "feature index {detail} exceeds {limit}",
    kernels.TWICE: "feature index {detail} appears twice",
    kernels.CLASS: "label {token!r} is not one of the classes {classes}",
    kernels.QID: "expected qid:<integer>, got {token!r}",
}


class Piece(NamedTuple):
    """Rows parsed from one block: views into the kernel's buffers, which the next piece
    overwrites (unless the buffers keep every piece, see ``read_all``)."""

    row_nnz: np.ndarray  # int64, nonzeros of each row
    labels: np.ndarray  # float64
    indices: np.ndarray  # int32 (int64 past 2**31 columns), 0-based, increasing in each row
    values: np.ndarray  # float64
    max_column: int  # largest 0-based column in the piece, -1 if none


class _Buffers:
    """Output buffers of the kernel.

    Reused for every piece, or with ``keep``, accumulating all rows: the kernel then writes
    each piece after the last, and a full buffer grows (by copying).
    """

    def __init__(self, index_dtype, keep=False, rows=None, nnz=None):
        self.keep = keep
        self.rows = self.nnz = 0  # kept so far
        self.max_column = -1
        self.first = None  # for a ``window``: its first row and nonzero in the whole
        self.row_nnz = np.empty(_ROWS if rows is None else rows, np.int64)
        self.labels = np.empty(_ROWS if rows is None else rows, np.float64)
        self.indices = np.empty(_NNZ if nnz is None else nnz, index_dtype)
        self.values = np.empty(_NNZ if nnz is None else nnz, np.float64)
        self.slow = np.empty((_SLOW, 5), np.int64)

    def tails(self):
        """Where the kernel writes next: (row_nnz, labels, indices, values)."""
        rows, nnz = self.rows, self.nnz
        return self.row_nnz[rows:], self.labels[rows:], self.indices[nnz:], self.values[nnz:]

    def advance(self, piece):
        self.max_column = max(self.max_column, piece.max_column)
        if self.keep:
            self.rows += piece.labels.size
            self.nnz += piece.indices.size

    def grow(self, full):
        """Double the buffer that the kernel found ``full``, keeping what was kept."""
        groups = {
            kernels.ROWS_FULL: (("row_nnz", "labels"), self.rows),
            kernels.NNZ_FULL: (("indices", "values"), self.nnz),
            kernels.SLOW_FULL: (("slow",), 0),
        }
        names, kept = groups[full]
        if self.first is not None and full != kernels.SLOW_FULL:
            raise RuntimeError("a window's rows and nonzeros were bounded: it cannot grow")
        for name in names:
            old = getattr(self, name)
            new = np.empty((max(2 * old.shape[0], 1), *old.shape[1:]), old.dtype)
            new[:kept] = old[:kept]
            setattr(self, name, new)

    def clear(self):
        """Forget the rows kept; the arrays stay, to be written again."""
        self.rows = self.nnz = 0
        self.max_column = -1

    def piece(self):
        """The rows kept, as a :class:`Piece` of views."""
        rows, nnz = self.rows, self.nnz
        return Piece(
            self.row_nnz[:rows], self.labels[:rows], self.indices[:nnz], self.values[:nnz],
            self.max_column,
        )  # fmt: skip

    def window(self, first_row, end_row, first_nnz, end_nnz):
        """Buffers that keep rows in ``[first_row, end_row)`` and nonzeros in
        ``[first_nnz, end_nnz)`` of these: views, with a ``slow`` buffer of their own."""
        window = _Buffers(self.indices.dtype, keep=True, rows=1, nnz=1)
        window.first = (first_row, first_nnz)
        window.row_nnz, window.labels = (
            self.row_nnz[first_row:end_row],
            self.labels[first_row:end_row],
        )
        window.indices, window.values = (
            self.indices[first_nnz:end_nnz],
            self.values[first_nnz:end_nnz],
        )
        return window

    def gather(self, windows):
        """Keep the rows the ``windows`` (of these buffers, in order) kept, one after the
        other; rows already in place are not moved."""
        for window in windows:
            first_row, first_nnz = window.first
            for name, kept, first, more in (
                ("row_nnz", self.rows, first_row, window.rows),
                ("labels", self.rows, first_row, window.rows),
                ("indices", self.nnz, first_nnz, window.nnz),
                ("values", self.nnz, first_nnz, window.nnz),
            ):
                if first != kept:
                    array = getattr(self, name)
                    array[kept : kept + more] = array[first : first + more]
            self.rows += window.rows
            self.nnz += window.nnz
            self.max_column = max(self.max_column, window.max_column)

    def kept(self):
        """What was kept: (row_nnz, labels, indices, values, max_column). The buffers are
        cut to size in place (no copy, unless something else holds a view of them)."""
        for name, size in (
            ("row_nnz", self.rows),
            ("labels", self.rows),
            ("indices", self.nnz),
            ("values", self.nnz),
        ):
            try:
                getattr(self, name).resize(size)
            except ValueError:  # viewed elsewhere: a view then
                setattr(self, name, getattr(self, name)[:size])
        return self.row_nnz, self.labels, self.indices, self.values, self.max_column


class _Parser:
    """What the kernel needs besides the text: the bounds on indices and labels."""

    def __init__(self, source, n_features, classes):
        self.source = source
        self.n_features = n_features
        self.max_index = int(n_features or INT32_MAX)
        self.index_dtype = np.int32 if self.max_index <= INT32_MAX else np.int64
        self.classes = np.asarray(classes, np.float64)

    def lines(self, text, line, *, out):
        """Parse the whole lines of ``text`` into ``out``, yielding the rows of each call of
        the kernel as a :class:`Piece`; returns the lines counted, from ``line``."""
        if text.flags.writeable:  # text read into a buffer parses as a mapped file does:
            text = text.view()  # one compiled kernel, not one for each
            text.flags.writeable = False
        done = 0
        while done < text.size:
            block = text[done:]
            row_nnz, labels, indices, values = out.tails()
            consumed, rows, nnz, n_slow, status, line, at, detail, max_column = kernels.parse_block(
                block, block.size, line, self.max_index, self.classes,
                row_nnz, labels, indices, values, out.slow,
            )  # fmt: skip
            if status > kernels.FULL:
                raise self._error(line, status, block, at, detail)
            piece = Piece(row_nnz[:rows], labels[:rows], indices[:nnz], values[:nnz], max_column)
            self._convert_slow(block, out.slow[:n_slow], piece)
            if rows:
                yield piece
            out.advance(piece)
            if status == kernels.FULL and (rows == 0 or (out.keep and detail != kernels.SLOW_FULL)):
                out.grow(detail)
            done += consumed
        return line

    def _convert_slow(self, block, slow, piece):
        """Convert the numbers the kernel left with ``float()``."""
        if not slow.size:
            return
        text = memoryview(block)
        numbers = np.empty(slow.shape[0])
        for n, (start, end, _, column, line) in enumerate(slow.tolist()):
            try:
                numbers[n] = float(text[start:end].tobytes())
            except ValueError:
                kind = "label" if column < 0 else "value"
                token = text[start:end].tobytes().decode("utf-8", "replace")
                message = f"expected a number as the {kind}, got {token!r}"
                raise ParseError(self.source, line, message) from None
            if column < 0 and self.classes.size and numbers[n] not in self.classes:
                token = text[start:end].tobytes().decode("utf-8", "replace")
                message = _MESSAGES[kernels.CLASS].format(token=token, classes=_show(self.classes))
                raise ParseError(self.source, line, message)
        kernels.place(slow, numbers, piece.row_nnz, piece.labels, piece.indices, piece.values)

    def _error(self, line, status, block, at, detail):
        end = at
        while end < block.size and end - at < 60 and int(block[end]) not in b" \t\r\n":
            end += 1
        token = bytes(block[at:end]).decode("utf-8", "replace")
        limit = (
            f"n_features={self.n_features}" if self.n_features else f"{INT32_MAX}; pass n_features"
        )
        message = _MESSAGES[status].format(
            token=token, detail=detail, limit=limit, classes=_show(self.classes)
        )
        return ParseError(self.source, line, message)


def iter_pieces(
    stream,
    source,
    *,
    n_features=None,
    classes=(),
    chunk_bytes=CHUNK_BYTES,
    on_block=None,
    out=None,
    threads=1,
):
    """Parse a binary stream of LIBSVM text; yield its rows as :class:`Piece` s in order.

    ``n_features`` bounds the indices (None: any below 2**31); ``classes`` lists the
    allowed labels (empty: any). Errors raise :class:`ParseError` naming ``source`` and the
    line; data that cannot be read (corrupt or cut short) is an error at the line reached.
    ``on_block(lines)`` is called after each block with the lines read so far (for
    progress bars). ``out``: the buffers to write to (see ``read_all``); by default pieces
    reuse the same ones. Without ``out``, a block of ``threads`` times ``chunk_bytes`` is
    split at line starts over up to ``threads`` threads that parse at once (None:
    ``numba.config.NUMBA_NUM_THREADS``), one for each ``THREAD_BYTES`` at least.
    """
    parser = _Parser(source, n_features, classes)
    threads = numba.config.NUMBA_NUM_THREADS if threads is None else threads
    if out is not None or threads == 1:
        parse = partial(parser.lines, out=out or _Buffers(parser.index_dtype))
    else:
        outs = [_Buffers(parser.index_dtype, keep=True) for _ in range(threads)]
        parse = partial(_lines_at_once, parser, outs=outs)
    size = chunk_bytes * (1 if out is not None else threads)
    carry = np.empty(0, np.uint8)  # the start of a line that the last block cut
    line = 0  # lines before the carry
    with _ReadAhead(stream, size) as blocks:
        for block, got, eof, failure in blocks:
            text = blocks.after(carry, block, got)
            # whole lines; at a clean end the last line too
            end = (
                text.size if eof and failure is None else kernels.last_line_end(text, text.size) + 1
            )
            if end:
                line = yield from parse(text[:end], line)
            if failure is not None:
                raise ParseError(source, line + 1, f"cannot read the data: {failure}")
            carry = text[end:].copy()  # (a line longer than a block: all of it)
            blocks.done(block)
            if on_block is not None:
                on_block(line)


class _ReadAhead:
    """The blocks of a binary stream, read (and decompressed, and hashed, as the stream
    does) by a thread of their own one block ahead of the caller, into two buffers in turn.

    Iterating yields ``(buffer, got, eof, failure)``: the block is ``buffer[HEAD:HEAD +
    got]``, the room before it left for the line the last block cut; ``eof`` at the end
    of the data or where reading failed (``failure``: the read error). Hand each buffer
    back with :meth:`done` once parsed. What else reading raises is raised here.
    """

    HEAD = 1 << 20

    def __init__(self, stream, size):
        self._read = getattr(stream, "readinto1", None) or stream.readinto  # one read a call
        self._free, self._full = queue.SimpleQueue(), queue.SimpleQueue()
        for _ in range(2):
            self._free.put(np.empty(self.HEAD + size, np.uint8))
        self._thread = threading.Thread(target=self._serve, name="read-ahead", daemon=True)
        self._thread.start()

    def _serve(self):
        eof = False
        while not eof and (buffer := self._free.get()) is not None:
            have, failure = self.HEAD, None
            try:
                while have < buffer.size:
                    got = self._read(memoryview(buffer)[have:])
                    if not got:
                        eof = True
                        break
                    have += got
            except _READ_ERRORS as exc:
                eof, failure = True, exc
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                self._full.put(exc)
                return
            self._full.put((buffer, have - self.HEAD, eof, failure))

    def __iter__(self):
        while True:
            item = self._full.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if item[2]:
                return

    def after(self, carry, buffer, got):
        """The text ``carry`` followed by the block in ``buffer``."""
        if carry.size > self.HEAD:
            return np.concatenate([carry, buffer[self.HEAD : self.HEAD + got]])
        start = self.HEAD - carry.size
        buffer[start : self.HEAD] = carry
        return buffer[start : self.HEAD + got]

    def done(self, buffer):
        """Hand ``buffer`` back, to be read into."""
        self._free.put(buffer)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._free.put(None)  # the thread stops after the block it may be reading
        self._thread.join()


def read_all(
    stream, source, *, n_features=None, classes=(), size_hint=None, chunk_bytes=CHUNK_BYTES
):
    """All rows of a stream: (row_nnz, labels, indices, values, max_column), written by the
    kernel straight into arrays that grow as needed (``size_hint``: bytes of text, if
    known, to size them once). Arguments as for ``iter_pieces``."""
    parser = _Parser(source, n_features, classes)
    nnz = max(_NNZ, (size_hint or 0) // _BYTES_PER_NONZERO)
    out = _Buffers(parser.index_dtype, keep=True, nnz=nnz)
    with _collector_paused():
        for _ in iter_pieces(
            stream, source, n_features=n_features, classes=classes, chunk_bytes=chunk_bytes, out=out
        ):
            pass
    return out.kept()


def read_file(path, *, start=0, stop=None, n_features=None, classes=(), threads=None):
    """All rows of the uncompressed LIBSVM file ``path``, or of the lines in its bytes
    ``[start, stop)`` (``start`` a line start): as ``read_all`` returns them.

    The bytes are mapped into memory, not copied (read, where they cannot be mapped), and
    split at line starts over up to ``threads`` threads (None:
    ``numba.config.NUMBA_NUM_THREADS``), one for each ``THREAD_BYTES`` at least. A first
    pass counts each part's lines and ``:`` (bounds on its rows and nonzeros), so that
    every part writes straight into the output at its place. Errors name the line in the
    file. Other arguments as for ``iter_pieces``.
    """
    parser = _Parser(str(path), n_features, classes)
    with open(path, "rb") as f:
        stop = os.fstat(f.fileno()).st_size if stop is None else stop
        if stop <= start:
            return _Buffers(parser.index_dtype, keep=True).kept()
        text = _mapped(f, start, stop)
    threads = numba.config.NUMBA_NUM_THREADS if threads is None else threads
    cuts = _line_starts(text, max(1, min(threads, text.size // THREAD_BYTES)))
    parts = [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    with _collector_paused():
        bounds = _in_threads(kernels.line_and_pair_bounds, parts)
        rows = np.cumsum([0] + [lines for lines, _ in bounds])
        nnz = np.cumsum([0] + [pairs for _, pairs in bounds])
        whole = _Buffers(parser.index_dtype, keep=True, rows=rows[-1], nnz=nnz[-1])
        windows = [
            whole.window(rows[p], rows[p + 1], nnz[p], nnz[p + 1]) for p in range(len(parts))
        ]
        parsed = _in_threads(
            _parse_into, [(parser, part, out) for part, out in zip(parts, windows, strict=True)]
        )
    for part, (_, error) in enumerate(parsed):
        if error is not None:
            before = _count_lines(path, start + cuts[part])
            raise ParseError(error.source, before + error.line, error.reason) from None
    whole.gather(windows)
    del windows  # views of whole's buffers, which are then cut to size in place
    return whole.kept()


def _mapped(f, start, stop):
    """Bytes ``[start, stop)`` of the open file ``f`` as a uint8 array: a memory map, or
    where the file cannot be mapped, read into memory."""
    offset = start - start % mmap.ALLOCATIONGRANULARITY
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # read at once
    try:
        mapped = mmap.mmap(f.fileno(), stop - offset, flags, mmap.PROT_READ, offset=offset)
        return np.frombuffer(mapped, np.uint8)[start - offset :]
    except (OSError, ValueError):
        text = np.empty(stop - start, np.uint8)
        f.seek(start)
        done = 0
        while done < text.size and (got := f.readinto(memoryview(text)[done:])):
            done += got
        return text[:done]


def _parse_into(work):
    """Parse the text into the buffers of ``work`` (parser, text, buffers): the lines
    counted and the ParseError met, or None."""
    parser, text, out = work
    try:
        return _drain(parser.lines(text, 0, out=out)), None
    except ParseError as exc:
        return 0, exc


def _lines_at_once(parser, text, line, *, outs):
    """Parse the whole lines of ``text``, split at line starts over the buffers ``outs``
    (one for each ``THREAD_BYTES`` at least), a thread each; yield each part's rows as a
    :class:`Piece`, in order; returns the lines counted, from ``line``."""
    cuts = _line_starts(text, max(1, min(len(outs), text.size // THREAD_BYTES)))
    parts = zip(cuts, cuts[1:], outs, strict=False)  # as many parts as cuts allow
    work = [(parser, text[a:b], out) for a, b, out in parts]
    for out in outs:
        out.clear()
    for (_, _, out), (lines, error) in zip(work, _in_threads(_parse_into, work), strict=True):
        if error is not None:
            raise ParseError(error.source, line + error.line, error.reason) from None
        if out.rows:
            yield out.piece()
        line += lines
    return line


def _drain(generator):
    """Run ``generator`` to its end; what it returns."""
    while True:
        try:
            next(generator)
        except StopIteration as end:
            return end.value


def _in_threads(function, items):
    """``[function(item) for item in items]``, each item in a thread of its own (the first
    in this one); what a call raises is raised here, once every call has ended."""
    results = [None] * len(items)
    errors = [None] * len(items)

    def run(n):
        try:
            results[n] = function(items[n])
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
            errors[n] = exc

    workers = [threading.Thread(target=run, args=(n,)) for n in range(1, len(items))]
    for worker in workers:
        worker.start()
    run(0)
    for worker in workers:
        worker.join()
    for error in errors:
        if error is not None:
            raise error
    return results


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector: the first call of a kernel in a process
    loads numba's compiler, whose many objects would set off collections (a tenth of a
    second). Parsing makes no reference cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _line_starts(text, parts):
    """``parts + 1`` offsets in ``text``: 0, the first line start at or after each
    ``p * text.size // parts``, and ``text.size``."""
    cuts = [0]
    for part in range(1, parts):
        at = max(cuts[-1], part * text.size // parts)
        while 0 < at < text.size and text[at - 1] != 10:
            ahead = np.flatnonzero(text[at : at + 4096] == 10)
            at = at + int(ahead[0]) + 1 if ahead.size else min(at + 4096, text.size)
        cuts.append(at)
    return cuts + [text.size]


def _count_lines(path, stop):
    """Lines before byte ``stop`` of the file ``path``."""
    lines = 0
    with open(path, "rb") as f:
        while stop > 0 and (chunk := f.read(min(stop, CHUNK_BYTES))):
            lines += chunk.count(b"\n")
            stop -= len(chunk)
    return lines


def _show(classes):
    return "{" + ", ".join(f"{c:g}" for c in classes) + "}"
