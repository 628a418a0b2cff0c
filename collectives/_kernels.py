"""Compiled kernels of the sparse collectives: merge-adds of sorted index lists, and the
bitmaps that carry dense enough index lists."""

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros


@njit(cache=True, nogil=True)
def _merge_into(ia, va, a0, a1, ib, vb, b0, b1, io, vo, k):
    """Merge-add ``ia[a0:a1]`` and ``ib[b0:b1]`` into ``io``/``vo`` from ``k``; the new end.

    Branchless: every step writes the smaller index and the sum of the values found there,
    with zero standing in for the side that does not hold it.
    """
    zero = vo.dtype.type(0)
    i, j = a0, b0
    while i < a1 and j < b1:
        # this many steps cannot exhaust either list: no bounds test inside
        for _ in range(min(a1 - i, b1 - j)):
            a = ia[i]
            b = ib[j]
            x = va[i]
            y = vb[j]
            take_a = a <= b
            take_b = b <= a
            io[k] = min(a, b)
            vo[k] = (x if take_a else zero) + (y if take_b else zero)
            i += np.intp(take_a)
            j += np.intp(take_b)
            k += 1
    while i < a1:
        io[k] = ia[i]
        vo[k] = va[i]
        i += 1
        k += 1
    while j < b1:
        io[k] = ib[j]
        vo[k] = vb[j]
        j += 1
        k += 1
    return k


@njit(cache=True, nogil=True)
def merge_add(ia, va, ib, vb):
    """The sum of two sparse vectors given as sorted unique indices and values."""
    io = np.empty(ia.size + ib.size, ia.dtype)
    vo = np.empty(ia.size + ib.size, va.dtype)
    k = _merge_into(ia, va, 0, ia.size, ib, vb, 0, ib.size, io, vo, 0)
    return io[:k], vo[:k]


@njit(cache=True, nogil=True)
def merge_runs(idx, val, offsets):
    """The sum of the sorted runs ``idx[offsets[r]:offsets[r + 1]]``, merged pairwise."""
    n = offsets[-1]
    src_i, src_v = idx[:n].copy(), val[:n].copy()
    dst_i, dst_v = np.empty_like(src_i), np.empty_like(src_v)
    off = offsets.copy()
    runs = off.size - 1
    while runs > 1:
        new_off = np.empty((runs + 1) // 2 + 1, off.dtype)
        new_off[0] = 0
        k = 0
        for r in range(0, runs - 1, 2):
            k = _merge_into(
                src_i,
                src_v,
                off[r],
                off[r + 1],
                src_i,
                src_v,
                off[r + 1],
                off[r + 2],
                dst_i,
                dst_v,
                k,
            )
            new_off[r // 2 + 1] = k
        if runs % 2:
            for t in range(off[runs - 1], off[runs]):
                dst_i[k] = src_i[t]
                dst_v[k] = src_v[t]
                k += 1
            new_off[-1] = k
        src_i, dst_i = dst_i, src_i
        src_v, dst_v = dst_v, src_v
        off = new_off
        runs = off.size - 1
    return src_i[: off[-1]], src_v[: off[-1]]


@njit(cache=True, nogil=True)
def accumulate(idx, val, lo, out):
    """Add ``val`` into ``out`` at ``idx - lo``."""
    for t in range(idx.size):
        out[idx[t] - lo] += val[t]


@njit(cache=True, nogil=True)
def to_bitmap(indices, lo, words):
    """Fill ``words`` with the bitmap of ``indices`` from ``lo``: bit ``b`` of word ``w``
    is set where ``lo + w * bits + b`` is an index, ``bits`` a word's width."""
    bits = np.uint64(words.itemsize * 8)
    one = np.uint64(1)
    words[:] = 0
    for t in range(indices.size):
        at = np.uint64(indices[t]) - np.uint64(lo)
        words[at // bits] |= words.dtype.type(one << (at % bits))


@njit(cache=True, nogil=True)
def from_bitmap(words, lo, out):
    """Write the indices that ``words`` marks (see :func:`to_bitmap`) into ``out`` in
    order; returns how many."""
    bits = np.uint64(words.itemsize * 8)
    one = np.uint64(1)
    k = 0
    for w in range(words.size):
        x = np.uint64(words[w])
        base = np.uint64(lo) + np.uint64(w) * bits
        while x != 0:
            out[k] = base + trailing_zeros(x)
            x &= x - one
            k += 1
    return k
