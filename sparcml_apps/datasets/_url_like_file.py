"""The rows of :func:`make_url_like` written as a LIBSVM file, a block at a time.

Every row of the generator depends on its number and the seed only, so a file of any size
is drawn in blocks of rows that are written and dropped: one pass draws the planted
margins of every row (8 bytes a row are all it keeps), for the threshold of the labels;
a second draws the rows again and writes them. Read back, the file gives
``make_url_like``'s matrix and labels bit for bit.
"""

import os
import tempfile
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numba import njit

from .._modes import set_default_mode
from ._synthetic import LABEL_NOISE, POWER_LAW, Rows

BLOCK_ROWS = 1 << 15
"""Rows drawn and written at a time."""
_VALUE_BYTES = 8  # " ", ":" and the longest value, "0.dddd"
_ROW_BYTES = 3  # the label and the newline of a row


@njit(cache=True, nogil=True)
def _digits(value, out, at):
    """Write the decimal digits of the non-negative integer ``value`` at ``out[at:]``;
    the position after them."""
    end = at
    rest = value
    while True:
        end += 1
        rest //= 10
        if rest == 0:
            break
    position = end
    while True:
        position -= 1
        out[position] = 48 + value % 10
        value //= 10
        if value == 0:
            break
    return end


@njit(cache=True, nogil=True)
def _format(indptr, indices, data, y, out):
    """The rows as LIBSVM text (``+1``/``-1`` labels, 1-based indices) in ``out``; the
    bytes written. Values are the generator's: 1, or k/10,000 for k < 10,000, written
    with the fewest of 4 decimals (which read back to the same double)."""
    at = 0
    for r in range(indptr.size - 1):
        out[at] = 43 if y[r] > 0 else 45  # "+" or "-"
        out[at + 1] = 49  # "1"
        at += 2
        for t in range(indptr[r], indptr[r + 1]):
            out[at] = 32  # " "
            at = _digits(np.int64(indices[t]) + 1, out, at + 1)
            out[at] = 58  # ":"
            at += 1
            value = data[t]
            if value == 1.0:
                out[at] = 49
                at += 1
                continue
            k = np.int64(round(value * 10000.0))
            decimals = 4
            while k % 10 == 0:
                k //= 10
                decimals -= 1
            out[at] = 48  # "0."
            out[at + 1] = 46
            at += 2
            for d in range(decimals - 1, -1, -1):
                out[at + d] = 48 + k % 10
                k //= 10
            at += decimals
        out[at] = 10  # "\n"
        at += 1
    return at


def write_url_like(
    path,
    n_samples,
    n_features=3231961,
    nnz_per_row=116,
    random_state=None,
    *,
    power_law=POWER_LAW,
    planted="sparse",
    label_noise=LABEL_NOISE,
    test_path=None,
    test_rows=0,
    progress=None,
):
    """Write the rows of :func:`make_url_like` to a LIBSVM file, a block at a time.

    The rows of ``make_url_like(n_samples, n_features, nnz_per_row, random_state, ...)``
    are drawn and written never more than a block of :data:`BLOCK_ROWS` of them a core at
    once, so that a file of any size can be made; the last ``test_rows`` go to
    ``test_path`` instead (the labels are those of the whole problem either way). Read
    back, the files give ``make_url_like``'s matrix and labels bit for bit. Each file is
    written under a temporary name beside it and renamed into place when complete, so an
    interrupted run leaves no partial file.

    Parameters
    ----------
    path : str or path-like
        The LIBSVM file to write (its folder is made where missing).
    n_samples : int
        The number of rows in all, at least 1.
    n_features : int, default 3231961
        The number of columns, at least 1.
    nnz_per_row : int, default 116
        The mean nonzeros of a row, at least 1.
    random_state : int or numpy.random.Generator, optional
        The seed; None (the default) takes fresh entropy.
    power_law : float, default 1.1
        The exponent of column popularity, as in :func:`make_url_like`.
    planted : {"sparse", "dense"}, default "sparse"
        The planted model, as in :func:`make_url_like`.
    label_noise : float, default 0.05
        The probability that a label is flipped, in [0, 0.5].
    test_path : str or path-like, optional
        The LIBSVM file for the last ``test_rows`` rows; required when ``test_rows`` is
        not 0. Default None.
    test_rows : int, default 0
        The number of rows, the last ones, that go to ``test_path``, in
        ``[0, n_samples)``.
    progress : callable, optional
        Called with ``(rows written, rows in all, seconds so far)`` after every block;
        default None.

    Returns
    -------
    list of pathlib.Path
        The files written: ``path``, then ``test_path`` where ``test_rows`` is not 0.

    Raises
    ------
    ValueError
        If an argument of :func:`make_url_like` is out of its range, ``test_rows`` is not
        an integer in ``[0, n_samples)``, or ``test_rows`` is given without
        ``test_path``.
    OSError
        If a file cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sparcml_apps.datasets import load_svmlight, make_url_like, write_url_like
    >>> folder = tempfile.TemporaryDirectory()
    >>> train, test = write_url_like(
    ...     Path(folder.name) / "train.svm", 5, n_features=50, nnz_per_row=3, random_state=0,
    ...     test_path=Path(folder.name) / "test.svm", test_rows=2)
    >>> print(train.read_text(), end="")
    -1 ...
    +1 ...
    -1 ...
    >>> X, y = make_url_like(5, n_features=50, nnz_per_row=3, random_state=0)
    >>> X_test, y_test = load_svmlight(test, n_features=50)
    >>> (X_test != X[3:]).nnz, bool((y_test == y[3:]).all())
    (0, True)
    >>> folder.cleanup()
    """
    rows = Rows.of(n_samples, n_features, nnz_per_row, random_state, power_law, planted,
                   label_noise)  # fmt: skip
    if not isinstance(test_rows, int | np.integer) or not 0 <= test_rows < n_samples:
        raise ValueError(
            f"test_rows must be an integer in [0, n_samples) = [0, {n_samples}); got {test_rows!r}"
        )
    if test_rows and test_path is None:
        raise ValueError(f"test_rows={test_rows} needs a test_path to write them to")
    begin = time.perf_counter()
    margins = np.empty(n_samples)
    for start, stop, drawn in _in_order(lambda a, b: rows.block(a, b)[3], 0, n_samples):
        margins[start:stop] = drawn
    threshold = rows.threshold(margins)
    cut = n_samples - test_rows
    parts = [(Path(path), 0, cut)] + ([(Path(test_path), cut, n_samples)] if test_rows else [])
    for target, first, last in parts:
        _write(target, rows, first, last, threshold, progress, begin)
    return [target for target, _, _ in parts]


def _in_order(draw, first, last):
    """``(start, stop, draw(start, stop))`` for the blocks of rows ``first`` to
    ``last - 1``, in order, drawn by a thread a core (the kernels release the GIL), a
    few blocks ahead at most."""
    spans = [(a, min(a + BLOCK_ROWS, last)) for a in range(first, last, BLOCK_ROWS)]
    workers = max(1, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(workers) as pool:
        ahead = deque(pool.submit(draw, a, b) for a, b in spans[:workers])
        for i, (a, b) in enumerate(spans):
            drawn = ahead.popleft().result()
            if i + workers < len(spans):
                ahead.append(pool.submit(draw, *spans[i + workers]))
            yield a, b, drawn


def _write(path, rows, first, last, threshold, progress, begin):
    """Rows ``first`` to ``last - 1`` into ``path``, through a temporary file."""
    entry = _VALUE_BYTES + len(str(rows.n_features))  # the longest " index:value"

    def text(start, stop):
        indices, data, indptr, margins = rows.block(start, stop)
        y = rows.labels(start, margins, threshold)
        out = np.empty(indices.size * entry + (stop - start) * _ROW_BYTES, np.uint8)
        return out[: _format(indptr, indices, data, y, out)]

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            for _, stop, out in _in_order(text, first, last):
                file.write(memoryview(out))
                if progress is not None:
                    progress(stop, rows.n_samples, time.perf_counter() - begin)
        set_default_mode(tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
