"""Rows to load in shares, the same whoever loads them: a dataset or the synthetic url."""

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..inputs import row_blocks
from ._dask import column_count
from ._shards import shard
from ._synthetic import make_url_like


@dataclass(frozen=True)
class Source:
    """Rows to load in shares, the same whoever loads them.

    The rows are a dataset (name, file or CSR cache) or the synthetic url-like data
    (``dataset=None``); ``part`` keeps the first ``1 - holdout`` of each share ("train"),
    the rest ("test"), or all of it. A share is read once for its two parts: the load of
    one keeps the other until it is loaded (the one of the last load only).

    Parameters
    ----------
    dataset : str, optional
        A catalogue name, a file or a CSR cache (:func:`shard` reads its shares); None:
        the synthetic data of :func:`make_url_like`, made once a process.
    n_features : int, optional
        The number of columns of a dataset, as :func:`shard` takes it.
    rows : int, default=200_000
        The synthetic data's number of rows.
    features : int, default=3_231_961
        The synthetic data's number of columns.
    nnz_per_row : int, default=116
        The synthetic data's mean nonzeros a row.
    seed : int, default=0
        The synthetic data's seed.
    holdout : float, default=0.0
        The share of each rank's rows that is "test", at the end of its rows.
    part : {"all", "train", "test"}, default="all"
        Which of each rank's rows :meth:`load` gives.
    data_home : str, optional
        The data home of a catalogue dataset (see :func:`data_home`).

    Examples
    --------
    >>> from sparcml_apps.datasets import Source
    >>> source = Source(rows=100, features=1000, nnz_per_row=10, holdout=0.2, part="train")
    >>> X, y = source.load(0, 2)
    >>> X.shape, source.width()
    ((40, 1000), 1000)
    >>> source.name()
    'url-like synthetic (100 rows, seed 0)'
    """

    dataset: str | None = None
    n_features: int | None = None
    rows: int = 200_000
    features: int = 3_231_961
    nnz_per_row: int = 116
    seed: int = 0
    holdout: float = 0.0
    part: str = "all"
    data_home: str | None = None

    def load(self, rank, size):
        """``(X, y)``: share ``rank`` of ``size``, the same whoever loads it.

        Parameters
        ----------
        rank : int
            The share, from 0 to ``size - 1``.
        size : int
            The number of shares.

        Returns
        -------
        X : scipy.sparse.csr_matrix
            The share's rows (those of ``part``).
        y : ndarray
            Their labels.
        """
        if self.part == "all":
            return self._share(rank, size)
        kept = _cut_off.pop((self, rank, size), None)
        if kept is not None:
            return kept
        X, y = self._share(rank, size)
        cut = X.shape[0] - int(round(self.holdout * X.shape[0]))
        parts = {"train": slice(None, cut), "test": slice(cut, None)}
        other = "test" if self.part == "train" else "train"
        _cut_off.clear()  # the share is read once for both parts: keep the other one
        _cut_off[replace(self, part=other), rank, size] = _rows(X, y, parts[other])
        return _rows(X, y, parts[self.part])

    def _share(self, rank, size):
        if self.dataset is None:
            X, y = _url_like(self.rows, self.features, self.nnz_per_row, self.seed)
            start, stop = row_blocks(X.shape[0], size)[rank : rank + 2]
            return X[start:stop], y[start:stop]
        return shard(self.dataset, rank, size, self.n_features, data_home=self.data_home)

    def width(self):
        """The number of columns, known without reading the rows.

        Returns
        -------
        int
            ``features`` for the synthetic data, else the dataset's number of columns.
        """
        if self.dataset is None:
            return self.features
        return column_count(self.dataset, self.n_features, None)

    def name(self):
        """What the rows are, to print.

        Returns
        -------
        str
            The dataset as given, or a description of the synthetic data.
        """
        return self.dataset or f"url-like synthetic ({self.rows:,} rows, seed {self.seed})"


_cut_off = {}
"""The part of a share that the last :meth:`Source.load` of a part cut off, by the
``(source, rank, size)`` that loads it, until that load takes it (one at most)."""


def _rows(X, y, rows):
    return X[rows], np.asarray(y[rows])


@lru_cache(maxsize=1)
def _url_like(rows, features, nnz_per_row, seed):
    """The synthetic data, made once a process (its train and test rows share it)."""
    return make_url_like(rows, features, nnz_per_row, random_state=seed)
