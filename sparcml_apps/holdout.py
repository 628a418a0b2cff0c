"""The rows early stopping holds out: the same rows however many ranks hold the data.

Rows are numbered across the ranks in rank order, and row ``g`` gets the key
``splitmix64(g + seed * 2**32)`` (distinct rows, distinct keys). Each stratum (a class,
or all rows of a regressor) holds out its rows of smallest key, as many as scikit-learn's
``StratifiedShuffleSplit`` / ``ShuffleSplit`` hold out: ``ceil(fraction * n)`` in all,
shared over the classes in proportion to their sizes. A row's key depends on its number
only, so one data set split over 1, 2 or 4 ranks in row order holds out the same rows.
"""

import math

import numpy as np

import collectives

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _keys(first_row, n_rows, seed):
    """splitmix64 of the numbers ``first_row + i`` (offset by the seed), as uint64."""
    x = np.arange(n_rows, dtype=np.uint64) + np.uint64(first_row + (seed << 32)) + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _sums(values, comm):
    return collectives.allreduce(np.asarray(values, np.float64), comm, algorithm="dense")


def _shares(counts, n_draws):
    """``n_draws`` shared over ``counts`` in proportion: the floors, then one more to the
    largest remainders (ties to the lower index), as scikit-learn's stratified split."""
    exact = counts * n_draws / counts.sum()
    share = np.floor(exact).astype(np.int64)
    remainder = exact - share
    share[np.argsort(-remainder, kind="stable")[: n_draws - share.sum()]] += 1
    return share


def _held_counts(counts, fraction):
    """Rows to hold out per stratum of ``counts`` rows: ``ceil(fraction * n)`` in all."""
    total = int(counts.sum())
    n_held = min(math.ceil(fraction * total), total)
    return counts - _shares(counts, total - n_held) if total else counts


def _thresholds(keys, strata, wanted, comm):
    """Per stratum, the ``wanted``-th smallest key over every rank (a bisection of the key
    range on global counts; 64 small allreduces at most)."""
    low = np.zeros(wanted.size, np.uint64)
    high = np.full(wanted.size, np.iinfo(np.uint64).max, np.uint64)
    while np.any(low < high):
        middle = low + (high - low) // np.uint64(2)
        below = np.bincount(strata[keys <= middle[strata]], minlength=wanted.size)
        enough = _sums(below, comm) >= wanted
        high = np.where(enough, middle, high)
        low = np.where(enough, low, middle + np.uint64(1))
    return low


def held_out(strata, n_strata, fraction, seed, comm):
    """Which of this rank's rows to hold out: a boolean mask.

    ``strata`` holds each row's stratum (``0 .. n_strata - 1``); ``seed`` is the same on
    every rank. Raises ValueError (on every rank) when either set would be empty.
    """
    rows = comm.allgather(strata.size)
    keys = _keys(sum(rows[: comm.Get_rank()]), strata.size, seed)
    counts = _sums(np.bincount(strata, minlength=n_strata), comm).astype(np.int64)
    held = _held_counts(counts, fraction)
    n_rows, n_held = int(counts.sum()), int(held.sum())
    if n_held == 0 or n_held == n_rows:
        raise ValueError(
            f"Splitting {n_rows} samples into a train set and a validation set with "
            f"validation_fraction={fraction!r} led to an empty set ({n_rows - n_held} and "
            f"{n_held} samples). Please either change validation_fraction, increase "
            "number of samples, or disable early_stopping."
        )
    threshold = _thresholds(keys, strata, held, comm)
    return (held[strata] > 0) & (keys <= threshold[strata])
