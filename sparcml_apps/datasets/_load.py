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
    r"""Load a LIBSVM (svmlight) text file, plain or compressed, into memory as ``(X, y)``.

    Each line is ``label index:value ...``. The 1-based indices of the file become 0-based
    columns, as with scikit-learn's ``load_svmlight_file(path, zero_based=False)``; the
    indices of a row may come in any order. The compression (gz, bz2, xz or tar.xz) is
    found from the file's first bytes (and, for tar.xz, its name).

    Parameters
    ----------
    path : str or path-like
        The file.
    n_features : int, optional
        The number of columns; an index past it is an error. None (the default) takes the
        largest index in the file.
    member : str, optional
        In a tar.xz archive, the file to read: its path in the archive or its last part.
        None (the default) takes the first file.
    threads : int, optional
        The most threads that parse a plain file at once; None (the default) means
        numba's ``NUMBA_NUM_THREADS``. Compressed files are parsed by one.

    Returns
    -------
    X : scipy.sparse.csr_matrix
        The rows: float64 values, sorted indices.
    y : numpy.ndarray
        The labels, float64.

    Raises
    ------
    FileNotFoundError
        If there is no file ``path``.
    ParseError
        If a line is malformed (a label or value that is no number, an index below 1 or
        past ``n_features``), or compressed data cannot be read; it names the line.
    ValueError
        If a tar.xz archive holds no file ``member``.

    See Also
    --------
    convert_svmlight : Convert a file too large for memory to a CSR cache.
    load : A dataset of the catalogue, by name.

    Examples
    --------
    >>> import gzip, tempfile
    >>> from pathlib import Path
    >>> from sparcml_apps.datasets import load_svmlight
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "tiny.svm"
    >>> _ = path.write_text("+1 1:0.5 3:1\n-1 2:2\n")
    >>> X, y = load_svmlight(path)
    >>> X.toarray()
    array([[0.5, 0. , 1. ],
           [0. , 2. , 0. ]])
    >>> y
    array([ 1., -1.])
    >>> load_svmlight(path, n_features=5)[0].shape
    (2, 5)
    >>> _ = Path(f"{path}.gz").write_bytes(gzip.compress(path.read_bytes()))
    >>> (load_svmlight(f"{path}.gz")[0] != X).nnz
    0
    >>> from sparcml_apps.datasets import ParseError
    >>> try:
    ...     load_svmlight(path, n_features=2)
    ... except ParseError as error:
    ...     print(error)
    /.../tiny.svm, line 1: feature index 3 exceeds n_features=2
    >>> folder.cleanup()
    """
    if sniff(path) == "none":
        return to_csr(read_file(path, n_features=n_features, threads=threads), n_features)
    described = f"{path}:{member}" if member else str(path)
    with open_data(path, member=member) as (stream, _):
        return to_csr(read_all(stream, described, n_features=n_features), n_features)


def convert_svmlight(
    path, cache_dir, n_features=None, *, member=None, progress=False, threads=None
):
    r"""Convert a LIBSVM file, plain or compressed, to a memory-mappable CSR cache directory.

    The file is streamed: memory use stays at a few blocks of text whatever its size. The
    cache holds ``indptr.npy``, ``indices.npy``, ``data.npy`` and ``labels.npy`` and a
    ``manifest.json``; :func:`load_cache` and :func:`shard` read it as memory maps. It is
    written beside ``cache_dir`` and put in its place only when complete (replacing what
    was there), so that a failure or an interrupt leaves no trace.

    Parameters
    ----------
    path : str or path-like
        The LIBSVM file: plain, gz, bz2, xz or tar.xz, as in :func:`load_svmlight`.
    cache_dir : str or path-like
        The cache directory to make; its parent folders are made where missing.
    n_features : int, optional
        The number of columns; an index past it is an error. None (the default) takes the
        largest index in the file.
    member : str, optional
        In a tar.xz archive, the file to read: its path in the archive or its last part.
        None (the default) takes the first file.
    progress : bool, default False
        Show a bar on a terminal: the bytes read, the rows, the rate and the time left.
    threads : int, optional
        The most threads that parse blocks of text at once; None (the default) means
        numba's ``NUMBA_NUM_THREADS``. The cache is the same whatever their number.

    Returns
    -------
    dict
        The cache's manifest: ``format``, ``shape``, ``nnz``, ``classes`` (the distinct
        labels), ``source``, ``member`` and ``source_checksum`` (the sha256 of the bytes
        read).

    Raises
    ------
    FileNotFoundError
        If there is no file ``path``.
    ParseError
        If a line is malformed or compressed data cannot be read; it names the line.
    ValueError
        If a tar.xz archive holds no file ``member``, or ``n_features`` is None and an
        index is past what int32 holds.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sparcml_apps.datasets import convert_svmlight, load_cache
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "tiny.svm"
    >>> _ = path.write_text("+1 1:0.5 3:1\n-1 2:2\n")
    >>> manifest = convert_svmlight(path, Path(folder.name) / "tiny.csr", n_features=4)
    >>> manifest["shape"], manifest["nnz"], manifest["classes"]
    ([2, 4], 3, [-1.0, 1.0])
    >>> X, y = load_cache(Path(folder.name) / "tiny.csr")
    >>> X.toarray()
    array([[0.5, 0. , 1. , 0. ],
           [0. , 2. , 0. , 0. ]])
    >>> folder.cleanup()
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
    r"""Load a CSR cache directory as ``(X, y)``: memory maps, nothing read in advance.

    Parameters
    ----------
    cache_dir : str or path-like
        A cache made by :func:`convert_svmlight` or :func:`convert`.

    Returns
    -------
    X : scipy.sparse.csr_matrix
        The rows, on memory maps of the cache's files.
    y : numpy.memmap
        The labels, float64.

    Raises
    ------
    ValueError
        If ``cache_dir`` holds no cache manifest (or one of another format), or its
        arrays do not have the lengths the manifest gives.
    FileNotFoundError
        If an array of the cache is missing.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sparcml_apps.datasets import convert_svmlight, load_cache
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "tiny.svm"
    >>> _ = path.write_text("+1 1:0.5 3:1\n-1 2:2\n")
    >>> _ = convert_svmlight(path, Path(folder.name) / "tiny.csr")
    >>> X, y = load_cache(Path(folder.name) / "tiny.csr")
    >>> X.shape, X.nnz
    ((2, 3), 3)
    >>> y
    memmap([ 1., -1.])
    >>> load_cache(folder.name)
    Traceback (most recent call last):
    ...
    ValueError: .../manifest.json: expected a CSR cache manifest: ...
    >>> folder.cleanup()
    """
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
