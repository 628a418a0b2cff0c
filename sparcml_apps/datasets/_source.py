"""Rows to load in shares, the same whoever loads them: a dataset or the synthetic url."""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ._dask import column_count
from ._shards import row_blocks, shard
from ._synthetic import make_url_like


@dataclass(frozen=True)
class Source:
    """Rows to load in shares: a dataset (name, file or CSR cache) or the synthetic
    url-like data (``dataset=None``); ``part`` keeps the first ``1 - holdout`` of each
    share ("train"), the rest ("test"), or all of it."""

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
        """``(X, y)``: share ``rank`` of ``size``, the same whoever loads it."""
        if self.dataset is None:
            X, y = _url_like(self.rows, self.features, self.nnz_per_row, self.seed)
            start, stop = row_blocks(X.shape[0], size)[rank : rank + 2]
            X, y = X[start:stop], y[start:stop]
        else:
            X, y = shard(self.dataset, rank, size, self.n_features, data_home=self.data_home)
        if self.part == "all":
            return X, y
        cut = X.shape[0] - int(round(self.holdout * X.shape[0]))
        rows = slice(None, cut) if self.part == "train" else slice(cut, None)
        return X[rows], np.asarray(y[rows])

    def width(self):
        """The number of columns, known without reading the rows."""
        if self.dataset is None:
            return self.features
        return column_count(self.dataset, self.n_features, self.data_home, None)

    def name(self):
        return self.dataset or f"url-like synthetic ({self.rows:,} rows, seed {self.seed})"


@lru_cache(maxsize=1)
def _url_like(rows, features, nnz_per_row, seed):
    """The synthetic data, made once a process (its train and test rows share it)."""
    return make_url_like(rows, features, nnz_per_row, random_state=seed)
