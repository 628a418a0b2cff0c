"""A synthetic stand-in for the LIBSVM ``url`` data: same shape statistics, planted labels."""

import numpy as np
import scipy.sparse as sp
from numba import njit

POWER_LAW = 1.1
"""Default exponent of column popularity: column ``j`` is drawn with weight ~ (j+1)^-POWER_LAW."""
NNZ_SIGMA = 0.4
"""Spread (log-normal sigma) of the nonzeros of a row around ``nnz_per_row``."""
REAL_COLUMNS = 64
"""The most popular columns hold real values in (0, 1]; all others hold 1."""
SUPPORT = 0.25
"""Share of the SUPPORT_COLUMNS most popular columns with a nonzero planted weight (the
sparse model)."""
SUPPORT_COLUMNS = 10_000
"""Columns past these never carry weight in the sparse model: rare columns are noise, as
most of url's are."""
POSITIVE = 1 / 3
"""Share of rows on the positive side of the planted model (``url``: about a third)."""
LABEL_NOISE = 0.05
"""Default probability that a label is flipped after the planted model set it."""
PLANTED = ("sparse", "dense")
"""The planted models :func:`make_url_like` knows (its ``planted``)."""
GENERATORS = {
    "url-like": {},
    "url-like-dense": {"power_law": 1.8, "planted": "dense", "label_noise": 0.2},
    "url-like-flat": {
        "n_features": 200_000, "nnz_per_row": 60, "power_law": 0.8, "planted": "dense",
        "label_noise": 0.1,
    },
}  # fmt: skip
"""The synthetic datasets benchmarks train on, by name: keyword arguments of
:func:`make_url_like`. ``url-like`` plants a sparse model that only frequent columns carry
(which flatters sparse learners); ``url-like-dense`` a dense model on a steeper power law
under 20% label noise; ``url-like-flat`` a dense model on 200,000 columns of a flatter
power law (0.8: 60 a row, the rarest columns in about 24 rows of 400,000) under 10%
label noise. ``make_url_like(n_samples, random_state=seed, **GENERATORS[name])`` draws
one."""

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_UNIT = 1.0 / (1 << 53)


@njit(cache=True, nogil=True)
def _mix(z):
    """SplitMix64's output function: a well-spread 64-bit hash of ``z``."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _uniform(state):
    """The next state and a uniform float in [0, 1) (SplitMix64)."""
    state = state + _GOLDEN
    return state, float(_mix(state) >> np.uint64(11)) * _UNIT


@njit(cache=True, nogil=True)
def _normal(state):
    """The next state and a standard normal draw (Box-Muller)."""
    state, u = _uniform(state)
    state, v = _uniform(state)
    return state, np.sqrt(-2.0 * np.log1p(-u)) * np.cos(2.0 * np.pi * v)


@njit(cache=True, nogil=True)
def _row_state(seed, row):
    return _mix(np.uint64(seed) ^ _mix(np.uint64(row) + _GOLDEN))


@njit(cache=True, nogil=True)
def _row_size(seed, row, nnz_per_row, most):
    state, z = _normal(_row_state(seed, row))
    k = int(round(nnz_per_row * np.exp(NNZ_SIGMA * z - NNZ_SIGMA * NNZ_SIGMA / 2)))
    return state, min(max(k, 1), most)


@njit(cache=True, nogil=True)
def _weights(seed, n_features, dense):
    """The planted weights: N(0, 1) on every column (``dense``), else on a SUPPORT share
    of the SUPPORT_COLUMNS most popular columns and 0 elsewhere."""
    w = np.zeros(n_features)
    state = _mix(np.uint64(seed) + _MIX1)
    for j in range(n_features if dense else min(n_features, SUPPORT_COLUMNS)):
        state, u = _uniform(state)
        state, g = _normal(state)
        if dense or u < SUPPORT:
            w[j] = g
    return w


@njit(cache=True, nogil=True)
def _row_sizes(seed, first, n_rows, nnz_per_row, most):
    """The nonzeros of rows ``first`` to ``first + n_rows - 1``."""
    sizes = np.empty(n_rows, np.int64)
    for r in range(n_rows):
        _, sizes[r] = _row_size(seed, first + r, nnz_per_row, most)
    return sizes


@njit(cache=True, nogil=True)
def _fill(seed, first, indptr, n_features, nnz_per_row, most, exponent, w, indices, data,
          margins):  # fmt: skip
    """Draw the distinct columns and values of rows ``first`` on (``indptr``: their
    extents); their planted margins into ``margins``. Each row depends on its number and
    the seed only, so any range of rows comes out as it does in the whole matrix."""
    # inverse CDF of the continuous power law on [1, n_features + 1)
    tail = 1.0 - (n_features + 1.0) ** (1.0 - exponent)
    power = 1.0 / (1.0 - exponent)
    taken = np.zeros(n_features, np.bool_)  # the columns of the row being drawn
    for r in range(indptr.size - 1):
        state, k = _row_size(seed, first + r, nnz_per_row, most)
        lo = indptr[r]
        for t in range(lo, lo + k):
            state, u = _uniform(state)
            indices[t] = min(int((1.0 - u * tail) ** power) - 1, n_features - 1)
        indices[lo : lo + k].sort()
        have = 1  # distinct columns, sorted, at the front of the row
        taken[indices[lo]] = True
        for t in range(lo + 1, lo + k):
            if indices[t] != indices[lo + have - 1]:
                indices[lo + have] = indices[t]
                taken[indices[t]] = True
                have += 1
        while have < k:  # replace the repeats, one sorted insertion each
            state, u = _uniform(state)
            column = min(int((1.0 - u * tail) ** power) - 1, n_features - 1)
            if taken[column]:
                continue
            taken[column] = True
            at = lo + np.searchsorted(indices[lo : lo + have], column)
            for t in range(lo + have, at, -1):
                indices[t] = indices[t - 1]
            indices[at] = column
            have += 1
        for t in range(lo, lo + k):
            taken[indices[t]] = False
        margin = 0.0
        for t in range(lo, lo + k):
            value = 1.0
            if indices[t] < REAL_COLUMNS:
                state, u = _uniform(state)
                value = (1.0 + np.floor(u * 10000.0)) / 10000.0
            data[t] = value
            margin += w[indices[t]] * value
        margins[r] = margin


@njit(cache=True, nogil=True)
def _labels(seed, first, margins, threshold, flip):
    """The labels of rows ``first`` on, from their ``margins``."""
    y = np.empty(margins.size)
    for r in range(margins.size):
        _, u = _uniform(_row_state(seed, first + r) ^ _MIX2)
        positive = (margins[r] > threshold) != (u < flip)
        y[r] = 1.0 if positive else -1.0
    return y


def make_url_like(
    n_samples,
    n_features=3231961,
    nnz_per_row=116,
    random_state=None,
    *,
    dtype=np.float64,
    power_law=POWER_LAW,
    planted="sparse",
    label_noise=LABEL_NOISE,
):
    """A seeded random sparse binary classification problem shaped like LIBSVM's ``url``.

    Columns are drawn with power-law popularity (weight ~ (j+1)^-power_law for column j;
    1.1 by default): the first few columns are in nearly every row, millions are rare.
    Each row holds distinct columns, about ``nnz_per_row`` of them (log-normal spread,
    sigma 0.4), sorted. Values are 1, except in the 64 most popular columns, which hold
    real values k/10000 in (0, 1].

    Labels come from a planted linear model ``w``. ``planted="sparse"`` (the default): a
    quarter of the 10,000 most popular columns, chosen at random, carry a N(0, 1) weight;
    all other columns weigh 0, so the millions of rare columns are noise to a learner.
    ``planted="dense"``: every column carries a N(0, 1) weight, so rare columns matter too
    and no sparse model fits well. A row is +1 when its margin ``x . w`` is in the top
    third of all margins (about a third of ``url`` is malicious), else -1; then each label
    is flipped with probability ``label_noise`` (0.05 by default). With the defaults no
    classifier beats about 95% accuracy; ``SGDClassifier(loss="log_loss")`` trained for
    5 epochs on 240,000 rows scores about 0.87 on 60,000 others.

    The same ``random_state`` and options give the same data bit for bit; each row depends
    on its number and the seed only (see :func:`write_url_like`). :data:`GENERATORS`
    names the variants the benchmarks use.

    Parameters
    ----------
    n_samples : int
        The number of rows, at least 1.
    n_features : int, default 3231961
        The number of columns, at least 1 (``url`` has 3,231,961).
    nnz_per_row : int, default 116
        The mean nonzeros of a row, at least 1 (``url``: about 116); a row holds at most
        half the columns.
    random_state : int or numpy.random.Generator, optional
        The seed; None (the default) takes fresh entropy.
    dtype : numpy dtype, default numpy.float64
        The dtype of the values of ``X``.
    power_law : float, default 1.1
        The exponent of column popularity: column ``j`` is drawn with weight
        ``(j + 1) ** -power_law``; positive, other than 1.
    planted : {"sparse", "dense"}, default "sparse"
        The planted model: weights on a quarter of the 10,000 most popular columns, or on
        every column.
    label_noise : float, default 0.05
        The probability that a label is flipped, in [0, 0.5].

    Returns
    -------
    X : scipy.sparse.csr_matrix
        The rows: ``dtype`` values, sorted int32 indices where they fit (else int64).
    y : numpy.ndarray
        The labels, float64, in {-1, +1}.

    Raises
    ------
    ValueError
        If ``n_samples``, ``n_features`` or ``nnz_per_row`` is not a positive integer,
        ``planted`` is not in :data:`PLANTED`, ``power_law`` is not a positive number
        other than 1, or ``label_noise`` is not in [0, 0.5].

    Examples
    --------
    >>> import numpy as np
    >>> from sparcml_apps.datasets import make_url_like
    >>> X, y = make_url_like(1000, n_features=5000, nnz_per_row=20, random_state=0)
    >>> X.shape, X.indices.dtype
    ((1000, 5000), dtype('int32'))
    >>> 15 < X.nnz / 1000 < 25
    True
    >>> np.unique(y)
    array([-1.,  1.])
    >>> X2, y2 = make_url_like(1000, n_features=5000, nnz_per_row=20, random_state=0)
    >>> (X2 != X).nnz, bool((y2 == y).all())
    (0, True)
    >>> make_url_like(10, planted="none")
    Traceback (most recent call last):
    ...
    ValueError: planted must be one of ['sparse', 'dense']; got 'none'
    """
    rows = Rows.of(
        n_samples, n_features, nnz_per_row, random_state, power_law, planted, label_noise
    )
    indices, data, indptr, margins = rows.block(0, n_samples)
    y = rows.labels(0, margins, rows.threshold(margins))
    X = sp.csr_matrix(
        (data.astype(dtype, copy=False), indices, indptr.astype(indices.dtype)),
        shape=(n_samples, n_features),
    )
    return X, y


class Rows:
    """The rows of one :func:`make_url_like` problem, drawn a range at a time."""

    def __init__(self, n_samples, n_features, nnz_per_row, seed, exponent, w, flip):
        self.n_samples, self.n_features, self.nnz_per_row = n_samples, n_features, nnz_per_row
        self.seed, self.exponent, self.w, self.flip = seed, exponent, w, flip
        self.most = max(1, n_features // 2)  # rows never need more than half the columns
        self.index_dtype = np.int32 if n_features < 2**31 else np.int64

    @classmethod
    def of(cls, n_samples, n_features, nnz_per_row, random_state, power_law, planted,
           label_noise):  # fmt: skip
        """The rows :func:`make_url_like` would draw with these arguments (checked)."""
        for name, value in (
            ("n_samples", n_samples),
            ("n_features", n_features),
            ("nnz_per_row", nnz_per_row),
        ):
            if not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if planted not in PLANTED:
            raise ValueError(f"planted must be one of {list(PLANTED)}; got {planted!r}")
        if not (isinstance(power_law, int | float) and power_law > 0 and power_law != 1):
            raise ValueError(f"power_law must be a positive number other than 1; got {power_law!r}")
        if not (isinstance(label_noise, int | float) and 0 <= label_noise <= 0.5):
            raise ValueError(f"label_noise must be a probability in [0, 0.5]; got {label_noise!r}")
        seed = int(np.random.default_rng(random_state).integers(1 << 63))
        w = _weights(seed, n_features, planted == "dense")
        return cls(n_samples, n_features, nnz_per_row, seed, float(power_law), w,
                   float(label_noise))  # fmt: skip

    def block(self, start, stop):
        """``(indices, data, indptr, margins)`` of rows ``start`` to ``stop - 1``: CSR
        arrays (int64 ``indptr``) and the planted margins."""
        sizes = _row_sizes(self.seed, start, stop - start, self.nnz_per_row, self.most)
        indptr = np.zeros(stop - start + 1, np.int64)
        np.cumsum(sizes, out=indptr[1:])
        nnz = int(indptr[-1])
        index_dtype = self.index_dtype if nnz < 2**31 else np.int64
        indices = np.empty(nnz, index_dtype)
        data = np.empty(nnz, np.float64)
        margins = np.empty(stop - start)
        _fill(self.seed, start, indptr, self.n_features, self.nnz_per_row, self.most,
              self.exponent, self.w, indices, data, margins)  # fmt: skip
        return indices, data, indptr, margins

    @staticmethod
    def threshold(margins):
        """The margin above which a row is positive (before the flips): the top
        :data:`POSITIVE` of all rows' ``margins``."""
        return np.quantile(margins, 1.0 - POSITIVE)

    def labels(self, start, margins, threshold):
        """The labels of rows ``start`` on, from their ``margins``."""
        return _labels(self.seed, start, margins, threshold, self.flip)
