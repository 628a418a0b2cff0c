"""The rows early stopping holds out, the same rows however many ranks hold the data, and
their score.

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

from . import kernels

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


def _held_counts(counts, fraction, most=None):
    """Rows to hold out per stratum of ``counts`` rows: ``ceil(fraction * n)`` in all, at
    most ``most`` (None: no bound)."""
    total = int(counts.sum())
    n_held = min(math.ceil(fraction * total), total, total if most is None else most)
    return counts - _shares(counts, total - n_held) if total else counts


def _thresholds(keys, strata, wanted, comm):
    """Per stratum, the ``wanted``-th smallest key over every rank (0 where none is
    wanted). Every key below it is among some rank's own ``wanted`` smallest of that
    stratum: each rank picks those (a partition, not a sort) and the ranks gather them."""
    mine = []
    for stratum, k in enumerate(wanted):
        own = keys[strata == stratum]
        k = min(int(k), own.size)
        mine.append(np.partition(own, k - 1)[:k] if k else own[:0])
    gathered = comm.allgather(mine)
    found = np.zeros(wanted.size, np.uint64)
    for stratum, k in enumerate(wanted):
        if k:
            every = np.concatenate([rank[stratum] for rank in gathered])
            found[stratum] = np.partition(every, k - 1)[k - 1]
    return found


def held_out(strata, n_strata, fraction, seed, comm, most=None):
    """Which of this rank's rows to hold out: a boolean mask.

    ``strata`` holds each row's stratum (``0 .. n_strata - 1``); ``seed`` is the same on
    every rank; ``most``, if given, bounds the rows held out in all. Raises ValueError (on
    every rank) when either set would be empty.
    """
    rows = comm.allgather(strata.size)
    keys = _keys(sum(rows[: comm.Get_rank()]), strata.size, seed)
    counts = _sums(np.bincount(strata, minlength=n_strata), comm).astype(np.int64)
    held = _held_counts(counts, fraction, most)
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


class HeldOut:
    """The held-out rows of every rank of ``comm`` and their score (accuracy, or R^2) of
    the model a fit would return: the average of the ranks' averages once averaging
    began, else the current model, which every rank holds alike.

    Only the weights of the columns some held-out row holds matter: once, the ranks agree
    on these columns; every epoch, each rank takes its model's values there and, while
    the ranks' averages differ, they sum them (one dense allreduce of those columns, not
    of the model); each rank then scores its own rows and the ranks sum the counts.

    A rise of the score is told from noise by the standard error of the difference of
    two scores of these rows by unrelated models (:func:`noise`): it depends on the rows
    and the score only, not on how much one epoch's model differs from another's, so
    that a fit on several ranks, whose models jitter less from epoch to epoch than one
    rank's, counts the same rises as one rank.
    """

    def __init__(self, X, y, weight, setup, comm):
        self.y, self.weight, self.setup, self.comm = y, weight, setup, comm
        # what the sums hold that no model changes: the weight (and a regressor's
        # weighted targets), and the weights squared, for the noise of the score
        self.fixed = [float(weight.sum())]
        if not setup.classifier:
            self.fixed += [float(weight @ y), float(weight @ y**2)]
        self.squared = weight * weight
        self.squared_total = float(self.squared.sum())
        held = np.zeros(X.shape[1], np.bool_)
        held[X.indices] = True
        if comm.Get_size() > 1:
            for columns in comm.allgather(np.flatnonzero(held)):
                held[columns] = True
        columns = np.flatnonzero(held)
        # this rank's rows over those columns only
        position = np.cumsum(held, dtype=X.indices.dtype)  # one array, of the indices' size
        position -= 1
        self.X = X.__class__(
            (X.data, position[X.indices], X.indptr), shape=(X.shape[0], columns.size)
        )
        n_out, n_features = setup.n_out, setup.n_features
        self.entries = (np.arange(n_out)[:, None] * n_features + columns).ravel()

    def sums(self, weights):
        """This rank's sums for :func:`score` and :func:`noise` (every rank calls it between
        epochs): [weighted correct, weight] for a classifier, [weighted squared error,
        weight, weighted y, weighted y^2] for a regressor; then, with the weights squared,
        the sums of the rows' values (correct, or squared error), of their squares and of
        the weights."""
        setup, state = self.setup, weights.state
        n = self.entries.size
        model = np.empty(n + setup.n_out)
        steps = state[kernels.AVERAGE_STEPS]
        averaged = bool(setup.average) and steps > 0
        if averaged:  # the summed weights are S * v - offsets
            at = state[kernels.AVERAGE_SUM]
            np.multiply(weights.v[self.entries], at / steps, out=model[:n])
            model[:n] -= weights.offsets[self.entries] / steps
            model[n:] = weights.average_intercept / steps
        else:
            np.multiply(weights.v[self.entries], state[kernels.WSCALE], out=model[:n])
            model[n:] = weights.intercept
        nprocs = self.comm.Get_size()
        if averaged and nprocs > 1:  # each rank holds the average of its own steps
            collectives.allreduce(model, self.comm, algorithm="dense", out=model)
            model /= nprocs
        coef = model[:n].reshape(setup.n_out, -1)
        scores = np.asarray(self.X @ coef.T) + model[n:]
        y, squared = self.y, self.squared
        if not setup.classifier:
            values = (scores[:, 0] - y) ** 2
        elif setup.multiclass:
            values = (scores.argmax(axis=1) == y).astype(np.float64)
        else:
            values = (np.where(scores[:, 0] > 0, 1.0, -1.0) == y).astype(np.float64)
        return [float(self.weight @ values), *self.fixed, float(squared @ values),
                float(squared @ values**2), self.squared_total]  # fmt: skip


def score(sums, setup):
    """Accuracy, or R^2, from the global sums of :meth:`HeldOut.sums`."""
    if setup.classifier:
        return sums[0] / max(sums[1], 1e-300)
    spread = _spread(sums)
    return 1.0 - sums[0] / spread if spread > 0 else 0.0


def _spread(sums):
    """The weighted sum of the squared deviations of a regressor's targets from their
    mean, from the sums of :meth:`HeldOut.sums` (R^2's denominator)."""
    total, first, second = sums[1:4]
    return second - first * first / max(total, 1e-300)


def noise(sums, setup):
    """The standard error of the difference of two scores (:func:`score`) of the rows of
    the global sums of :meth:`HeldOut.sums` by unrelated models: the square root of twice
    the variance of one score, the rows taken as independent and weighted."""
    total = max(sums[1], 1e-300)
    mean = sums[0] / total  # of the rows' values
    by_squares, squares_by_squares, squared = sums[-3:]
    variance = squares_by_squares - 2 * mean * by_squares + mean * mean * squared
    scale = total if setup.classifier else max(_spread(sums), 1e-300)
    return math.sqrt(2 * max(variance, 0.0)) / scale
