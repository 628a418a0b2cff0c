"""LIBSVM files by path: loaded whole into memory, or converted to a CSR cache."""

import hashlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._cache import INT32_MAX, read_cache, write_cache
from ._compression import open_data, sniff
from ._download import progress_bar, read_progress
from ._svmlight import iter_pieces, read_all, read_file


def load_svmlight(path, n_features=None, *, member=None, threads=None):
    """``(X, y)`` from a LIBSVM/svmlight text file, plain or compressed (.gz, .bz2, .xz, .tar.xz).

    1-based indices in the file become 0-based columns, as with scikit-learn's
    ``load_svmlight_file(path, zero_based=False)``. ``n_features`` fixes the column count
    (None: the largest index). In a tar.xz, ``member`` names the file to read (default: the
    first). A plain file is parsed by up to ``threads`` threads at once (None: numba's
    ``NUMBA_NUM_THREADS``). Returns a CSR matrix with sorted indices and float64 labels.
    """
    if sniff(path) == "none":
        return to_csr(read_file(path, n_features=n_features, threads=threads), n_features)
    described = f"{path}:{member}" if member else str(path)
    with open_data(path, member=member) as (stream, _):
        return to_csr(read_all(stream, described, n_features=n_features), n_features)


def convert_svmlight(
    path, cache_dir, n_features=None, *, member=None, progress=False, threads=None
):
    """Convert a LIBSVM file (plain, .gz, .bz2, .xz, .tar.xz) to a CSR cache directory, streaming:
    memory use stays at a few blocks whatever the file size. Returns the cache manifest.

    Columns as in ``load_svmlight``; ``cache_dir`` is replaced atomically when complete.
    With ``progress``, a bar on a terminal shows the bytes read, the rows, the rate and the
    time left. Blocks of text are parsed by up to ``threads`` threads at once (None:
    numba's ``NUMBA_NUM_THREADS``); the cache is the same whatever their number.
    """
    described = f"{path}:{member}" if member else str(path)
    info = {"source": str(path), "member": member}
    with (
        open_data(path, member=member, digest=hashlib.sha256()) as (stream, raw),
        progress_bar(Path(path).stat().st_size, 0, f"convert {Path(path).name}", progress) as bar,
    ):

        def check(manifest):  # the digest of the bytes read, whatever the file is now
            manifest["source_checksum"] = f"sha256:{raw.finish()}"

        pieces = iter_pieces(
            stream,
            described,
            n_features=n_features,
            on_block=read_progress(bar, raw),
            threads=threads,
        )
        return write_cache(pieces, cache_dir, n_features=n_features, info=info, check=check)


def load_cache(cache_dir):
    """``(X, y)`` from a CSR cache directory: memory maps, nothing read in advance."""
    X, y, _ = read_cache(cache_dir)
    return X, y


def to_csr(rows, n_features=None):
    """``(X, y)`` from ``read_all`` output; indptr takes the dtype of the indices."""
    row_nnz, labels, indices, values, max_column = rows
    n_features = max_column + 1 if n_features is None else n_features
    if indices.dtype == np.int32 and indices.size > INT32_MAX:
        indices = indices.astype(np.int64)
    indptr = np.zeros(row_nnz.size + 1, indices.dtype)
    np.cumsum(row_nnz, out=indptr[1:])
    X = sp.csr_matrix((values, indices, indptr), shape=(row_nnz.size, n_features), copy=False)
    return X, labels
