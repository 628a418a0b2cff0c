"""LIBSVM files by path: loaded whole into memory, or converted to a CSR cache."""

import numpy as np
import scipy.sparse as sp

from ._cache import INT32_MAX, read_cache, write_cache
from ._compression import open_data
from ._svmlight import iter_pieces


def load_svmlight(path, n_features=None, *, member=None):
    """``(X, y)`` from a LIBSVM/svmlight text file, plain or compressed (.bz2, .xz, .tar.xz).

    1-based indices in the file become 0-based columns, as with scikit-learn's
    ``load_svmlight_file(path, zero_based=False)``. ``n_features`` fixes the column count
    (None: the largest index). In a tar.xz, ``member`` names the file to read (default: the
    first). Returns a CSR matrix with sorted indices and float64 labels.
    """
    described = f"{path}:{member}" if member else str(path)
    with open_data(path, member=member) as (stream, _):
        return assemble(iter_pieces(stream, described, n_features=n_features), n_features)


def convert_svmlight(path, cache_dir, n_features=None, *, member=None):
    """Convert a LIBSVM file (plain, .bz2, .xz, .tar.xz) to a CSR cache directory, streaming:
    memory use stays at a few blocks whatever the file size. Returns the cache manifest.

    Columns as in ``load_svmlight``; ``cache_dir`` is replaced atomically when complete.
    """
    described = f"{path}:{member}" if member else str(path)
    info = {"source": str(path), "member": member}
    with open_data(path, member=member) as (stream, _):
        pieces = iter_pieces(stream, described, n_features=n_features)
        return write_cache(pieces, cache_dir, n_features=n_features, info=info)


def load_cache(cache_dir):
    """``(X, y)`` from a CSR cache directory: memory maps, nothing read in advance."""
    X, y, _ = read_cache(cache_dir)
    return X, y


def assemble(pieces, n_features=None):
    """One CSR matrix and label vector from ``iter_pieces`` output."""
    row_nnz, labels, indices, values = [], [], [], []
    max_column = -1
    for piece in pieces:
        row_nnz.append(piece.row_nnz.copy())
        labels.append(piece.labels.copy())
        narrow = piece.max_column < INT32_MAX
        indices.append(piece.indices.astype(np.int32 if narrow else np.int64))
        values.append(piece.values.copy())
        max_column = max(max_column, piece.max_column)
    n_features = max_column + 1 if n_features is None else n_features
    nnz = sum(map(len, indices))
    index_dtype = np.int32 if max(nnz, n_features) <= INT32_MAX else np.int64
    indptr = np.zeros(sum(map(len, row_nnz)) + 1, index_dtype)
    np.cumsum(np.concatenate([np.zeros(0, np.int64), *row_nnz]), out=indptr[1:])
    X = sp.csr_matrix(
        (
            np.concatenate([np.zeros(0), *values]),
            np.concatenate([np.zeros(0, index_dtype), *indices]).astype(index_dtype, copy=False),
            indptr,
        ),
        shape=(len(indptr) - 1, n_features),
        copy=False,
    )
    return X, np.concatenate([np.zeros(0), *labels])
