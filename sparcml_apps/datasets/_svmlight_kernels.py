"""The numba kernels of the LIBSVM parser: lines of text to rows, decimal to float64.

Every kernel is in this one file: numba's cache of a function is renewed when its own
file changes, not when a function it calls from another file does.

Numbers are rounded to nearest, ties to even, as ``float()`` rounds them. A number's first
19 significant digits ``w`` and its power of ten ``q`` give the value.
Short ones (``w <= 2**53``, ``|q| <= 22``) take one exact product or quotient (Clinger).
The others are multiplied by a 128-bit truncation of ``5**q`` (Eisel-Lemire): the top bits
of the product are the double, unless the truncation leaves them within 2 units of the
last place of a rounding tie. Those, subnormals, inf, nan and numbers past 19 digits whose
two bounds ``w`` and ``w + 1`` round apart are left to Python (code ``SLOW``).
"""

import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

EXACT, SLOW, BAD = 0, 1, 2
"""The codes of ``number``: converted, left to Python, malformed."""
ROWS_FULL, NNZ_FULL, SLOW_FULL = range(3)
"""Which output buffer a FULL status of ``parse_block`` means."""
OK, FULL, BAD_LABEL, BAD_PAIR, BAD_VALUE, ZERO, RANGE, TWICE, CLASS, QID = range(10)
"""The statuses of ``parse_block``: past FULL, the error found."""

_Q_MIN, _Q_MAX = -342, 308  # below: rounds to 0 whatever 19 digits; above: to inf
_EXPONENT_CAP = 100_000  # written exponents beyond this are left to Python
_INDEX_CAP = 1 << 62  # indices beyond this saturate (and are then out of range)


def _powers_of_five():
    """``5**q`` for q in [_Q_MIN, _Q_MAX] as 128-bit floors in [2**127, 2**128): their high
    and low 64 bits, and the part of a result's biased binary exponent that depends on q
    alone (the rest: the product's top bit, less the leading zeros shifted out of w)."""
    size = _Q_MAX - _Q_MIN + 1
    high, low = np.empty(size, np.uint64), np.empty(size, np.uint64)
    exponent = np.empty(size, np.int64)
    for k, q in enumerate(range(_Q_MIN, _Q_MAX + 1)):
        power = 5 ** abs(q)
        if q >= 0:
            log2 = power.bit_length() - 1  # floor(log2(5**q))
            scaled = power << (127 - log2) if log2 <= 127 else power >> (log2 - 127)
        else:
            log2 = -power.bit_length()  # floor(log2(5**q)): 5**-q is no power of two
            scaled = (1 << (127 - log2)) // power
        high[k], low[k] = scaled >> 64, scaled & (2**64 - 1)
        exponent[k] = q + log2 + 1086
    return high, low, exponent


_POW5_HIGH, _POW5_LOW, _POW5_EXPONENT = _powers_of_five()
_POW10 = np.array([10.0**k for k in range(23)])  # exactly representable
_U_INDEX_CAP = np.uint64(_INDEX_CAP)
_U0, _U1, _U4, _U8, _U9, _U10, _U52, _U63 = (np.uint64(k) for k in (0, 1, 4, 8, 9, 10, 52, 63))
_U10_POW = np.array([10**k for k in range(20)], np.uint64)
_ROOM = np.array([10 ** (19 - k) for k in range(9)], np.uint64)  # w below: k more digits fit
_LITTLE_ENDIAN = sys.byteorder == "little"  # eight bytes read as one uint64, first lowest
_LOW_NIBBLES, _HIGH_NIBBLES, _SIXES, _THREES = (
    np.uint64(int.from_bytes(bytes([b]) * 8, "little")) for b in (0x0F, 0xF0, 0x06, 0x33)
)
_ALL_ONES = np.uint64(2**64 - 1)
_HIDDEN = np.uint64(1 << 52)
_TWO53 = np.uint64(1 << 53)


@intrinsic
def _mul128(typingctx, a, b):
    """The 128-bit product of two uint64: (high, low)."""
    signature = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

    def codegen(context, builder, sig, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        low = builder.trunc(product, ir.IntType(64))
        return context.make_tuple(builder, sig.return_type, (high, low))

    return signature, codegen


@intrinsic
def _leading_zeros(typingctx, a):
    """Leading zero bits of a nonzero uint64."""

    def codegen(context, builder, sig, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@intrinsic
def _as_double(typingctx, bits):
    """The float64 whose IEEE 754 bits are ``bits``."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.uint64), codegen


@intrinsic
def _load8(typingctx, buf, i):
    """The eight bytes ``buf[i:i + 8]`` of a contiguous uint8 array as one uint64."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        array = context.make_array(sig.args[0])(context, builder, args[0])
        address = builder.gep(array.data, [args[1]])
        return builder.load(builder.bitcast(address, ir.IntType(64).as_pointer()), align=1)

    return types.uint64(buf, types.intp), codegen


@intrinsic
def unowned(typingctx, array):
    """The same array without its owner: no reference counting where it is passed on.
    Valid while the caller holds ``array``."""

    def codegen(context, builder, sig, args):
        source = context.make_array(sig.args[0])(context, builder, args[0])
        view = context.make_array(sig.return_type)(context, builder)
        context.populate_array(
            view,
            data=source.data,
            shape=source.shape,
            strides=source.strides,
            itemsize=source.itemsize,
            meminfo=None,
        )
        return view._getvalue()

    return array(array), codegen


@intrinsic
def _trailing_zeros(typingctx, a):
    """Trailing zero bits of a nonzero uint64."""

    def codegen(context, builder, sig, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@njit(cache=True, nogil=True, inline="always")
def _leading_digits(chunk):
    """How many of the eight bytes of ``chunk``, from the lowest, are ASCII digits before
    the first that is not."""
    # a digit's high nibble is 3, and stays 3 when 6 is added
    marks = ((chunk & _HIGH_NIBBLES) | (((chunk + _SIXES) & _HIGH_NIBBLES) >> _U4)) ^ _THREES
    return 8 if marks == _U0 else np.int64(_trailing_zeros(marks) >> np.uint64(3))


@njit(cache=True, nogil=True, inline="always")
def _eight_digits(chunk):
    """The value of eight ASCII digits (or zero bytes), the first in the lowest byte."""
    v = chunk & _LOW_NIBBLES
    v = v * _U10 + (v >> _U8)  # bytes 0, 2, 4, 6: two-digit numbers
    pairs = np.uint64(0x000000FF000000FF)
    v = (v & pairs) * np.uint64(100 + (1_000_000 << 32)) + (
        (v >> np.uint64(16)) & pairs
    ) * np.uint64(1 + (10_000 << 32))
    return v >> np.uint64(32)


@njit(cache=True, nogil=True)
def _eisel_lemire(w, q):
    """``w * 10**q`` for a uint64 ``w > 0``, correctly rounded: (value, converted). A call,
    not inlined: rows of 16-digit numbers parse as fast, and its four copies inlined in
    :func:`parse_block` took a quarter of the parser's compile time (4 of 15 s)."""
    if q < _Q_MIN:
        return 0.0, True
    if q > _Q_MAX:
        return np.inf, True
    zeros = _leading_zeros(w)
    w = w << zeros
    k = q - _Q_MIN
    high, low = _mul128(w, _POW5_HIGH[k])
    carry, _ = _mul128(w, _POW5_LOW[k])
    low += carry
    high += _U1 if low < carry else _U0
    # the exact product lies in [high:low, high:low + 2)
    upper = high >> _U63
    shift = upper + _U9
    mantissa = high >> shift  # 54 bits: the double's 53 and the rounding bit
    rest = high & ((_U1 << shift) - _U1)
    if mantissa & _U1:
        if rest == _U0 and low == _U0:
            return 0.0, False  # at or just above a tie
    elif rest == (_U1 << shift) - _U1 and low == _ALL_ONES:
        return 0.0, False  # just below a tie
    biased = _POW5_EXPONENT[k] + np.int64(upper) - np.int64(zeros)
    if biased <= 0:
        return 0.0, False  # subnormal
    mantissa = (mantissa + (mantissa & _U1)) >> _U1
    if mantissa == _TWO53:
        mantissa = _HIDDEN
        biased += 1
    if biased >= 2047:
        return np.inf, True
    return _as_double((np.uint64(biased) << _U52) | (mantissa - _HIDDEN)), True


@njit(cache=True, nogil=True, inline="always")
def scan_digits(buf, j, n, w):
    """Scan the digits at ``buf[j:n]``, appending them to ``w`` while it stays below
    10**19: (end, w, taken, dropped), ``dropped`` telling whether a digit left out was
    nonzero. Eight bytes at a time where the buffer allows."""
    taken = 0
    while _LITTLE_ENDIAN and j + 8 <= n:
        chunk = _load8(buf, j)
        count = _leading_digits(chunk)
        if count == 0 or w >= _ROOM[count]:
            break
        w = w * _U10_POW[count] + _eight_digits(chunk << (_U8 * (_U8 - np.uint64(count))))
        j += count
        taken += count
        if count < 8:
            return j, w, taken, False
    dropped = False
    while j < n and 48 <= buf[j] <= 57:
        if w < _U10_POW[18]:
            w = w * _U10 + np.uint64(buf[j] - 48)
            taken += 1
        else:
            dropped |= buf[j] != 48
        j += 1
    return j, w, taken, dropped


@njit(cache=True, nogil=True, inline="always")
def number(buf, i, n):
    """Scan a decimal number at ``buf[i:n]`` up to a byte ``is_end`` accepts:
    (value, end, code) with code EXACT, SLOW (left to Python: see the module) or BAD."""
    j = i
    negative = False
    if j < n and (buf[j] == 43 or buf[j] == 45):  # + -
        negative = buf[j] == 45
        j += 1
    start = j
    j, w, taken, truncated = scan_digits(buf, j, n, _U0)
    exponent = j - start - taken  # integer digits left out
    seen = j > start
    if j < n and buf[j] == 46:  # .
        start = j + 1
        j, w, taken, dropped = scan_digits(buf, start, n, w)
        exponent -= taken
        truncated |= dropped
        seen |= j > start
    if not seen:
        # inf, nan and friends go to Python; anything else there is malformed
        k = j
        while k < n and not is_end(buf[k]):
            k += 1
        letter = j < n and ((buf[j] | 32) == 105 or (buf[j] | 32) == 110)  # i n
        return 0.0, k, SLOW if letter else BAD
    capped = False
    if j < n and (buf[j] == 101 or buf[j] == 69):  # e E
        j += 1
        exponent_negative = False
        if j < n and (buf[j] == 43 or buf[j] == 45):
            exponent_negative = buf[j] == 45
            j += 1
        if j >= n or not 48 <= buf[j] <= 57:
            return 0.0, j, BAD
        e = 0
        while j < n and 48 <= buf[j] <= 57:
            if e < _EXPONENT_CAP:
                e = e * 10 + (buf[j] - 48)
            j += 1
        capped = e >= _EXPONENT_CAP
        exponent += -e if exponent_negative else e
    if j < n and not is_end(buf[j]):
        return 0.0, j, BAD
    if w == _U0:
        return -0.0 if negative else 0.0, j, EXACT
    if capped:
        return 0.0, j, SLOW
    if not truncated and w <= _TWO53 and -22 <= exponent <= 22:
        value = float(w)
        value = value * _POW10[exponent] if exponent >= 0 else value / _POW10[-exponent]
    else:
        value, converted = _eisel_lemire(w, exponent)
        if truncated and converted:
            # the digits lie between w and w + 1 (times 10**exponent): both must agree
            bound, converted = _eisel_lemire(w + _U1, exponent)
            converted &= bound == value
        if not converted:
            return 0.0, j, SLOW
    return -value if negative else value, j, EXACT


@njit(cache=True, nogil=True, inline="always")
def is_end(c):
    """Whether byte ``c`` may follow a number: space, tab, \\r, \\n or '#'."""
    return c == 32 or c == 9 or c == 13 or c == 10 or c == 35


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


@njit(cache=True, nogil=True, error_model="numpy")
def parse_block(buf, n, line, max_index, classes, row_nnz, labels, indices, values, slow):
    """Parse whole lines of ``buf[:n]`` into the output buffers.

    Returns (consumed, rows, nnz, n_slow, status, line, error_at, detail, max_column). It
    stops at a line start with status FULL when an output buffer could overflow, and at
    the offending line with an error status. ``slow`` rows are (start, end, row, column,
    line) of the numbers left for Python; column -1 marks a label.
    """
    buf = unowned(buf)
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
            full = ROWS_FULL if rows == row_cap else SLOW_FULL
            return line_start, rows, nnz, n_slow, FULL, line - 1, line_start, full, max_column
        label, j, code = number(buf, i, n)
        if code == BAD:
            return line_start, rows, nnz, n_slow, BAD_LABEL, line, i, 0, max_column
        if code == SLOW:
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
                return line_start, rows, nnz, n_slow, CLASS, line, i, 0, max_column
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
                if not ok or i == digits or (i < n and not is_end(buf[i])):
                    return line_start, rows, nnz, n_slow, QID, line, token, 0, max_column
                continue
            if nnz == nnz_cap or n_slow + 1 >= slow_cap:
                full = NNZ_FULL if nnz == nnz_cap else SLOW_FULL
                kept = _slow_before(slow, n_slow, rows)
                return line_start, rows, start, kept, FULL, line - 1, line_start, full, max_column
            i, digits, taken, _ = scan_digits(buf, i, n, _U0)
            index = np.int64(digits) if i - token == taken and digits < _U_INDEX_CAP else _INDEX_CAP
            if i == token or i >= n or buf[i] != 58:
                return line_start, rows, nnz, n_slow, BAD_PAIR, line, token, 0, max_column
            if index == 0:
                return line_start, rows, nnz, n_slow, ZERO, line, token, 0, max_column
            if index > max_index:
                return line_start, rows, nnz, n_slow, RANGE, line, token, index, max_column
            value, j, code = number(buf, i + 1, n)
            if code == BAD:
                return line_start, rows, nnz, n_slow, BAD_VALUE, line, token, 0, max_column
            if code == SLOW:
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
            return line_start, rows, nnz, n_slow, TWICE, line, line_start, twice, max_column
        row_nnz[rows] = nnz - start
        rows += 1
        if i < n:
            i += 1  # the line end
    return n, rows, nnz, n_slow, OK, line, n, 0, max_column


@njit(cache=True, nogil=True)
def _slow_before(slow, n_slow, rows):
    """How many of the first ``n_slow`` slow records belong to rows before ``rows``."""
    k = n_slow
    while k > 0 and slow[k - 1, 2] >= rows:
        k -= 1
    return k


@njit(cache=True, nogil=True)
def line_and_pair_bounds(buf):
    """Bounds on the rows and the nonzeros of the LIBSVM text ``buf``: its line starts
    (each line holds a row at most) and its ``:`` (each nonzero has one)."""
    lines = 0
    colons = 0
    for c in buf:
        lines += c == 10
        colons += c == 58
    return lines + (buf.size > 0 and buf[-1] != 10), colons


@njit(cache=True, nogil=True)
def last_line_end(buf, n):
    """Index of the last ``\\n`` in ``buf[:n]``, or -1."""
    for k in range(n - 1, -1, -1):
        if buf[k] == 10:
            return k
    return -1


@njit(cache=True, nogil=True)
def place(slow, numbers, row_nnz, labels, indices, values):
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
