"""Switch points of the sparse collectives.

They are read at every call, so tests and benchmarks may assign to them (on every rank of
the communicator alike) to make small vectors take the paths of large ones.

Examples
--------
>>> from collectives import thresholds
>>> thresholds.DELTA_SCALE, thresholds.ACCUMULATE_FRACTION, thresholds.BITMAP, thresholds.WAIT
(1.0, 0.125, 'auto', 'auto')
"""

DELTA_SCALE = 1.0
"""A reduced index range of ``n`` entries is sent dense once its nonzeros exceed
``DELTA_SCALE * delta``, where ``delta = n * itemsize(value) / (itemsize(index) +
itemsize(value))`` is the count at which the sparse form takes as many bytes as the dense."""

ACCUMULATE_FRACTION = 0.125
"""When the entries a rank receives for its index range exceed this fraction of the range's
length, it sums them into a dense buffer instead of merging them as sorted lists."""

BITMAP = "auto"
"""How the sorted indices of a sparse block travel: ``"list"`` (as they are), ``"bitmap"``
(as a bitmap of the block's index range, one bit an index, wherever that takes fewer bytes
than the list), or ``"auto"``: as a bitmap where it takes fewer bytes and the bytes it
saves take longer to send than writing and reading the bitmap, at the seconds a byte of the
call's cost model constants (:func:`sends_bitmap`). The receiver tells the two apart by the
sizes of the messages, so the ranks need not agree on it."""

BITMAP_SECONDS = 3e-9
"""Seconds per entry to write a sorted index list as a bitmap and to read it back."""


def delta(n, value_itemsize, index_itemsize):
    """The nonzero count past which ``n`` entries are cheaper to send dense.

    ``DELTA_SCALE * n * value_itemsize / (index_itemsize + value_itemsize)``: with
    ``DELTA_SCALE`` 1, the count at which indices and values take as many bytes as the
    ``n`` dense values.

    Parameters
    ----------
    n : int
        The entries of the index range.
    value_itemsize : int
        The bytes of a value: 4 for float32, 8 for float64.
    index_itemsize : int
        The bytes of an index: 4 for ``uint32``, 8 for ``uint64``.

    Returns
    -------
    float
        The threshold, with :data:`DELTA_SCALE` as it is at the call.

    Examples
    --------
    >>> from collectives import thresholds
    >>> thresholds.delta(1000, 4, 4)  # float32 values, uint32 indices: half the range
    500.0
    >>> f"{thresholds.delta(1000, 8, 4):.1f}"  # float64 values: two thirds
    '666.7'
    """
    return DELTA_SCALE * n * value_itemsize / (index_itemsize + value_itemsize)


def bitmap_words(length, index_itemsize):
    """The words of a bitmap of ``length`` bits, a word as wide as an index.

    Parameters
    ----------
    length : int or float
        The bits: the length of the index range it marks.
    index_itemsize : int
        The bytes of an index and of a word: 4 or 8.

    Returns
    -------
    int or float
        The words, rounded up.

    Examples
    --------
    >>> from collectives.thresholds import bitmap_words
    >>> bitmap_words(2**20, 4), bitmap_words(100, 8)
    (32768, 2)
    """
    return -(-length // (8 * index_itemsize))


def sends_bitmap(nnz, length, index_itemsize, beta):
    """Whether ``nnz`` sorted indices of a range of ``length`` travel as a bitmap.

    As :data:`BITMAP` says: never with ``"list"``; with ``"bitmap"`` wherever the
    bitmap has fewer words than the list; with ``"auto"`` where, besides, the bytes it
    saves take longer to send (``beta`` a byte) than :data:`BITMAP_SECONDS` an entry.

    Parameters
    ----------
    nnz : float
        The indices (an expectation may be fractional).
    length : int
        The length of the index range they lie in.
    index_itemsize : int
        The bytes of an index (and of a word of the bitmap): 4 or 8.
    beta : float
        Seconds a byte (the cost model's ``beta``).

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        If :data:`BITMAP` is none of its three values.

    Examples
    --------
    >>> from collectives.thresholds import sends_bitmap
    >>> sends_bitmap(300_000, 2**20, 4, beta=6e-9)  # 29% of the range over 1 Gbit/s
    True
    >>> sends_bitmap(300_000, 2**20, 4, beta=2e-10)  # where bytes are cheaper to copy
    False
    >>> sends_bitmap(30_000, 2**20, 4, beta=6e-9)  # 2.9%: the list is shorter
    False
    """
    if BITMAP not in ("auto", "list", "bitmap"):
        raise ValueError(
            f"collectives.thresholds.BITMAP must be 'auto', 'list' or 'bitmap', got {BITMAP!r}"
        )
    words = bitmap_words(length, index_itemsize)
    if BITMAP == "list" or words >= nnz:
        return False
    if BITMAP == "bitmap":
        return True
    return beta * index_itemsize * (nnz - words) > BITMAP_SECONDS * nnz


WAIT = "auto"
"""How a rank waits for other ranks: ``"poll"`` (MPI's own waits, which keep the core busy),
``"nap"`` (test, then nap between tests), or ``"auto"``: nap when the node runs more ranks of
the communicator than this process has cores, else poll."""

SPIN_SECONDS = 50e-6
"""A waiting rank tests its requests this long before it starts to yield between tests."""

YIELD_SECONDS = 0.05
"""Until a wait has lasted this long, a waiting rank yields its core between tests
(``sched_yield``: a process that shares the core runs on, and with none the test comes
back at once); then it naps. Yielding notices the end of a wait at once, as the rounds of a
collective need, and on Linux's scheduler (EEVDF, 6.6 and later) slows a rank that shares
the core less than napping does (a process computing beside a waiting one, measured on one
core: 0-7% slower beside one that yields, 5-18% beside one whose naps grow to 0.5 ms)."""

NAP_SECONDS = 20e-6
"""The nap between tests of a waiting rank (the system's timer slack may lengthen it)."""

LONGEST_NAP_SECONDS = 5e-4
"""The longest nap of a waiting rank (or of the thread that drives non-blocking calls):
naps grow from ``NAP_SECONDS`` to this while a wait lasts past ``YIELD_SECONDS``, so a
long wait (for a rank still stepping) takes little CPU time, at the price of up to this
much delay in noticing that the wait is over."""
