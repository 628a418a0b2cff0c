"""LIBSVM/svmlight text to CSR rows: a numba kernel over large byte blocks read in chunks.

A line is ``label [qid:N] index:value ...`` with 1-based increasing indices; ``#`` starts a
comment, blank lines are skipped, spaces, tabs and ``\\r`` separate tokens. Numbers whose
digits fit in 53 bits with a power of ten up to 22 (nearly all real data) are converted in
the kernel exactly as ``strtod`` does (one correctly rounded product or quotient); the others
are handed back and converted by Python, which rounds correctly too.
"""

import lzma
import tarfile
import zlib
from typing import NamedTuple

import numpy as np
from numba import njit

from ._cache import INT32_MAX
from ._errors import ParseError

CHUNK_BYTES = 1 << 24
"""Bytes read at a time; a block is parsed up to its last line end."""

_ROWS, _NNZ, _SLOW = 1 << 18, 1 << 22, 1 << 14  # first capacities of the output buffers

_OK, _FULL, _BAD_LABEL, _BAD_PAIR, _BAD_VALUE, _ZERO, _RANGE, _TWICE, _CLASS, _QID = range(10)
_MESSAGES = {
    _BAD_LABEL: "expected a number as the label, got {token!r}",
    _BAD_PAIR: "expected index:value, got {token!r}",
    _BAD_VALUE: "expected a number after the index, got {token!r}",
    _ZERO: "feature index 0 in {token!r}: LIBSVM indices start at 1",
    _RANGE: "feature index {detail} exceeds {limit}",
    _TWICE: "feature index {detail} appears twice",
    _CLASS: "label {token!r} is not one of the classes {classes}",
    _QID: "expected qid:<integer>, got {token!r}",
}

_POW10 = np.array([10.0**k for k in range(23)])  # exactly representable
_INDEX_CAP = 1 << 62  # indices beyond this saturate (and are then out of range)


class Piece(NamedTuple):
    """Rows parsed from one block: views into the kernel's buffers, which the next piece
    overwrites (unless the buffers keep every piece, see ``read_all``)."""

    row_nnz: np.ndarray  # int64, nonzeros of each row
    labels: np.ndarray  # float64
    indices: np.ndarray  # int32 (int64 past 2**31 columns), 0-based, increasing in each row
    values: np.ndarray  # float64
    max_column: int  # largest 0-based column in the piece, -1 if none


@njit(cache=True, nogil=True)
def _is_end(c):
    # a byte that may follow a number: space, tab, \r, \n, '#'
    return c == 32 or c == 9 or c == 13 or c == 10 or c == 35


@njit(cache=True, nogil=True)
def _number(buf, i, n):
    """Scan a decimal number at ``buf[i:n]``: (value, end, code); code 0 exact, 1 left for
    Python (too many digits, a large exponent, inf, nan), 2 malformed."""
    j = i
    negative = False
    if j < n and (buf[j] == 43 or buf[j] == 45):  # + -
        negative = buf[j] == 45
        j += 1
    mantissa = 0
    digits = 0  # significant digits in mantissa
    exponent = 0
    seen = False
    exact = True
    while j < n and 48 <= buf[j] <= 57:
        seen = True
        if digits < 18:
            mantissa = mantissa * 10 + (buf[j] - 48)
            digits += mantissa != 0
        else:
            exponent += 1
            exact &= buf[j] == 48
        j += 1
    if j < n and buf[j] == 46:  # .
        j += 1
        while j < n and 48 <= buf[j] <= 57:
            seen = True
            if digits < 18:
                mantissa = mantissa * 10 + (buf[j] - 48)
                digits += mantissa != 0
                exponent -= 1
            else:
                exact &= buf[j] == 48
            j += 1
    if not seen:
        # inf, nan and friends go to Python; anything else there is malformed too
        k = j
        while k < n and not _is_end(buf[k]):
            k += 1
        letter = j < n and ((buf[j] | 32) == 105 or (buf[j] | 32) == 110)  # i n
        return 0.0, k, 1 if letter else 2
    if j < n and (buf[j] == 101 or buf[j] == 69):  # e E
        j += 1
        exponent_negative = False
        if j < n and (buf[j] == 43 or buf[j] == 45):
            exponent_negative = buf[j] == 45
            j += 1
        if j >= n or not 48 <= buf[j] <= 57:
            return 0.0, j, 2
        e = 0
        while j < n and 48 <= buf[j] <= 57:
            if e < 100000:
                e = e * 10 + (buf[j] - 48)
            j += 1
        exponent += -e if exponent_negative else e
    if j < n and not _is_end(buf[j]):
        return 0.0, j, 2
    if mantissa == 0 and exact:
        return -0.0 if negative else 0.0, j, 0
    if not exact or mantissa > (1 << 53) or exponent < -22 or exponent > 22:
        return 0.0, j, 1
    value = float(mantissa)
    value = value * _POW10[exponent] if exponent >= 0 else value / _POW10[-exponent]
    return -value if negative else value, j, 0


@njit(cache=True, nogil=True)
def _finish_row(indices, values, start, stop, unsorted):
    """Sort a row's columns if they came out of order; the first repeated column or -1."""
    if not unsorted:
        return -1
    order = np.argsort(indices[start:stop], kind="mergesort")
    indices[start:stop] = indices[start:stop][order]
    values[start:stop] = values[start:stop][order]
    for k in range(start + 1, stop):
        if indices[k] == indices[k - 1]:
            return indices[k] + 1
    return -1


@njit(cache=True, nogil=True)
def _parse_block(buf, n, line, max_index, classes, row_nnz, labels, indices, values, slow):
    """Parse whole lines of ``buf[:n]`` into the output buffers.

    Returns (consumed, rows, nnz, n_slow, status, line, error_at, detail, max_column). It
    stops at a line start with status _FULL when an output buffer could overflow, and at
    the offending line with an error status. ``slow`` rows are (start, end, row, column,
    line) of the numbers left for Python; column -1 marks a label.
    """
    i = 0
    rows = 0
    nnz = 0
    n_slow = 0
    max_column = -1
    row_cap = labels.size
    nnz_cap = indices.size
    slow_cap = slow.shape[0]
    while i < n:
        line_start = i
        # skip blanks; blank lines and comment lines hold no row
        while i < n and (buf[i] == 32 or buf[i] == 9 or buf[i] == 13):
            i += 1
        if i >= n:
            break
        line += 1
        if buf[i] == 10:
            i += 1
            continue
        if buf[i] == 35:
            while i < n and buf[i] != 10:
                i += 1
            i += 1
            continue
        if rows == row_cap or n_slow + 1 >= slow_cap:
            return line_start, rows, nnz, n_slow, _FULL, line - 1, line_start, 0, max_column
        label, j, code = _number(buf, i, n)
        if code == 2:
            return line_start, rows, nnz, n_slow, _BAD_LABEL, line, i, 0, max_column
        if code == 1:
            slow[n_slow, 0] = i
            slow[n_slow, 1] = j
            slow[n_slow, 2] = rows
            slow[n_slow, 3] = -1
            slow[n_slow, 4] = line
            n_slow += 1
        elif classes.size:
            known = False
            for c in classes:
                known |= c == label
            if not known:
                return line_start, rows, nnz, n_slow, _CLASS, line, i, 0, max_column
        labels[rows] = label
        i = j
        start = nnz
        previous = -1
        unsorted = False
        while True:
            while i < n and (buf[i] == 32 or buf[i] == 9 or buf[i] == 13):
                i += 1
            if i >= n or buf[i] == 10:
                break
            if buf[i] == 35:
                while i < n and buf[i] != 10:
                    i += 1
                break
            token = i
            if buf[i] == 113:  # q: qid:<integer>, skipped
                ok = i + 4 < n and buf[i + 1] == 105 and buf[i + 2] == 100 and buf[i + 3] == 58
                i += 4
                digits = i
                while ok and i < n and 48 <= buf[i] <= 57:
                    i += 1
                if not ok or i == digits or (i < n and not _is_end(buf[i])):
                    return line_start, rows, nnz, n_slow, _QID, line, token, 0, max_column
                continue
            if nnz == nnz_cap or n_slow + 1 >= slow_cap:
                if start == 0 and rows == 0:
                    # the line alone is larger than the buffers: the caller grows them
                    return 0, 0, 0, 0, _FULL, line - 1, line_start, 0, max_column
                kept = _slow_before(slow, n_slow, rows)
                return line_start, rows, start, kept, _FULL, line - 1, line_start, 0, max_column
            index = 0
            while i < n and 48 <= buf[i] <= 57:
                if index < _INDEX_CAP:
                    index = index * 10 + (buf[i] - 48)
                i += 1
            if i == token or i >= n or buf[i] != 58:
                return line_start, rows, nnz, n_slow, _BAD_PAIR, line, token, 0, max_column
            if index == 0:
                return line_start, rows, nnz, n_slow, _ZERO, line, token, 0, max_column
            if index > max_index:
                return line_start, rows, nnz, n_slow, _RANGE, line, token, index, max_column
            value, j, code = _number(buf, i + 1, n)
            if code == 2:
                return line_start, rows, nnz, n_slow, _BAD_VALUE, line, token, 0, max_column
            if code == 1:
                slow[n_slow, 0] = i + 1
                slow[n_slow, 1] = j
                slow[n_slow, 2] = rows
                slow[n_slow, 3] = index - 1
                slow[n_slow, 4] = line
                n_slow += 1
            i = j
            column = index - 1
            unsorted |= column <= previous
            previous = column
            max_column = max(max_column, column)
            indices[nnz] = column
            values[nnz] = value
            nnz += 1
        twice = _finish_row(indices, values, start, nnz, unsorted)
        if twice >= 0:
            return line_start, rows, nnz, n_slow, _TWICE, line, line_start, twice, max_column
        row_nnz[rows] = nnz - start
        rows += 1
        if i < n:
            i += 1  # the line end
    return n, rows, nnz, n_slow, _OK, line, n, 0, max_column


@njit(cache=True, nogil=True)
def _slow_before(slow, n_slow, rows):
    """How many of the first ``n_slow`` slow records belong to rows before ``rows``."""
    k = n_slow
    while k > 0 and slow[k - 1, 2] >= rows:
        k -= 1
    return k


@njit(cache=True, nogil=True)
def _last_line_end(buf, n):
    """Index of the last ``\\n`` in ``buf[:n]``, or -1."""
    for k in range(n - 1, -1, -1):
        if buf[k] == 10:
            return k
    return -1


class _Buffers:
    """Output buffers of the kernel.

    Reused for every piece, or with ``keep``, accumulating all rows: the kernel then writes
    each piece after the last, and the buffers grow (by copying) when full.
    """

    def __init__(self, index_dtype, keep=False, nnz=_NNZ):
        self.keep = keep
        self.rows = self.nnz = 0  # kept so far
        self.row_nnz = np.empty(_ROWS, np.int64)
        self.labels = np.empty(_ROWS, np.float64)
        self.indices = np.empty(nnz, index_dtype)
        self.values = np.empty(nnz, np.float64)
        self.slow = np.empty((_SLOW, 5), np.int64)

    def tails(self):
        """Where the kernel writes next: (row_nnz, labels, indices, values)."""
        rows, nnz = self.rows, self.nnz
        return self.row_nnz[rows:], self.labels[rows:], self.indices[nnz:], self.values[nnz:]

    def advance(self, rows, nnz):
        if self.keep:
            self.rows += rows
            self.nnz += nnz

    def grow(self):
        """Double every buffer, keeping what was kept."""
        for name in ("row_nnz", "labels", "indices", "values", "slow"):
            old = getattr(self, name)
            new = np.empty((2 * old.shape[0], *old.shape[1:]), old.dtype)
            kept = self.rows if name in ("row_nnz", "labels") else self.nnz
            if self.keep and name != "slow":
                new[:kept] = old[:kept]
            setattr(self, name, new)


def iter_pieces(
    stream,
    source,
    *,
    n_features=None,
    classes=(),
    chunk_bytes=CHUNK_BYTES,
    on_block=None,
    out=None,
):
    """Parse a binary stream of LIBSVM text; yield its rows as :class:`Piece` s in order.

    ``n_features`` bounds the indices (None: any below 2**31); ``classes`` lists the
    allowed labels (empty: any). Errors raise :class:`ParseError` naming ``source`` and the
    line. ``on_block()`` is called after each block (for progress bars). ``out``: the
    buffers to write to (see ``read_all``); by default pieces reuse the same ones.
    """
    max_index = int(n_features or INT32_MAX)
    classes = np.asarray(classes, np.float64)
    out = out or _Buffers(np.int32 if max_index <= INT32_MAX else np.int64)
    buf = np.empty(chunk_bytes, np.uint8)
    have = 0  # bytes in buf
    line = 0  # lines before buf[0]
    eof = False
    while not eof or have:
        while not eof and have < buf.size:
            try:
                got = stream.readinto(memoryview(buf)[have:])
            except (OSError, EOFError, lzma.LZMAError, tarfile.TarError, zlib.error) as exc:
                raise ParseError(source, line + 1, f"cannot read the data: {exc}") from None
            eof = not got
            have += got or 0
        end = have if eof else _last_line_end(buf, have) + 1
        if end == 0:  # a line longer than the buffer
            buf = np.concatenate([buf, np.empty(buf.size, np.uint8)])
            continue
        done = 0
        while done < end:
            block = buf[done:end]
            row_nnz, labels, indices, values = out.tails()
            result = _parse_block(
                block,
                end - done,
                line,
                max_index,
                classes,
                row_nnz,
                labels,
                indices,
                values,
                out.slow,
            )
            consumed, rows, nnz, n_slow, status, line, error_at, detail, max_column = result
            if status > _FULL:
                raise _error(source, line, status, block, error_at, detail, n_features, classes)
            piece = Piece(row_nnz[:rows], labels[:rows], indices[:nnz], values[:nnz], max_column)
            _convert_slow(source, block, out.slow[:n_slow], piece, classes)
            if rows:
                yield piece
            out.advance(rows, nnz)
            if status == _FULL and (rows == 0 or out.keep):
                out.grow()
            done += consumed
        buf[: have - end] = buf[end:have]
        have -= end
        if on_block is not None:
            on_block()


def read_all(
    stream, source, *, n_features=None, classes=(), size_hint=None, chunk_bytes=CHUNK_BYTES
):
    """All rows of a stream: (row_nnz, labels, indices, values, max_column), written by the
    kernel straight into arrays that grow as needed (``size_hint``: bytes of text, if
    known, to size them once). Arguments as for ``iter_pieces``."""
    index_dtype = np.int32 if (n_features or 0) <= INT32_MAX else np.int64
    nnz = max(_NNZ, (size_hint or 0) // 7)  # url-like text takes about 8 bytes a nonzero
    out = _Buffers(index_dtype, keep=True, nnz=nnz)
    max_column = -1
    pieces = iter_pieces(
        stream, source, n_features=n_features, classes=classes, chunk_bytes=chunk_bytes, out=out
    )
    for piece in pieces:
        max_column = max(max_column, piece.max_column)
    rows, nnz = out.rows, out.nnz
    return out.row_nnz[:rows], out.labels[:rows], out.indices[:nnz], out.values[:nnz], max_column


def _convert_slow(source, block, slow, piece, classes):
    """Convert the numbers the kernel left to Python, as ``strtod`` would."""
    if not slow.size:
        return
    tokens = [bytes(block[start:end]) for start, end in slow[:, :2].tolist()]
    try:
        numbers = np.array(tokens).astype(np.float64)
    except ValueError:
        for k, token in enumerate(tokens):
            try:
                float(token)
            except ValueError:
                kind = "label" if slow[k, 3] < 0 else "value"
                text = token.decode("utf-8", "replace")
                message = f"expected a number as the {kind}, got {text!r}"
                raise ParseError(source, int(slow[k, 4]), message) from None
        raise
    if classes.size:
        unknown = (slow[:, 3] < 0) & ~np.isin(numbers, classes)
        if unknown.any():
            k = int(np.argmax(unknown))
            token = tokens[k].decode("utf-8", "replace")
            message = _MESSAGES[_CLASS].format(token=token, classes=_show(classes))
            raise ParseError(source, int(slow[k, 4]), message)
    _place(slow, numbers, piece.row_nnz, piece.labels, piece.indices, piece.values)


@njit(cache=True, nogil=True)
def _place(slow, numbers, row_nnz, labels, indices, values):
    """Store Python's conversions: labels by row, values by row and column."""
    row = 0
    offset = 0  # first nonzero of ``row``
    for k in range(slow.shape[0]):
        while row < slow[k, 2]:
            offset += row_nnz[row]
            row += 1
        if slow[k, 3] < 0:
            labels[row] = numbers[k]
        else:
            stop = offset + row_nnz[row]
            values[offset + np.searchsorted(indices[offset:stop], slow[k, 3])] = numbers[k]


def _error(source, line, status, block, at, detail, n_features, classes):
    end = at
    while end < block.size and end - at < 60 and int(block[end]) not in b" \t\r\n":
        end += 1
    token = bytes(block[at:end]).decode("utf-8", "replace")
    limit = f"n_features={n_features}" if n_features else f"{INT32_MAX}; pass n_features"
    message = _MESSAGES[status].format(
        token=token, detail=detail, limit=limit, classes=_show(classes)
    )
    return ParseError(source, line, message)


def _show(classes):
    return "{" + ", ".join(f"{c:g}" for c in classes) + "}"
