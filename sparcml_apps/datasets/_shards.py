"""Byte-range shards: rank ``r`` of ``P`` gets the rows that start in its share of the bytes."""

from bisect import bisect_left
from pathlib import Path

import numpy as np

from ._api import convert
from ._cache import is_cache, read_cache, read_manifest
from ._catalog import read_catalog
from ._compression import sniff
from ._load import to_csr
from ._svmlight import read_file


def catalogue_of(name, catalog=None):
    """The catalogue (``catalog``: one read already, a path, or None for the shipped one)
    that holds the dataset ``name``, which is not a file; FileNotFoundError if it does not."""
    cat = catalog if hasattr(catalog, "datasets") else read_catalog(catalog)
    if str(name) not in cat.datasets:
        raise FileNotFoundError(
            f"{name}: expected a file, a CSR cache directory or a dataset of the "
            f"catalogue {cat.source}; found none of them"
        )
    return cat


def shard(name_or_path, rank, size, n_features=None, *, data_home=None, catalog=None):
    r"""The rows of share ``rank`` of ``size`` of a dataset, in file order, as ``(X, y)``.

    Over ranks ``0`` to ``size - 1`` every row comes exactly once, and a rank reads only
    its own bytes. What ``name_or_path`` is decides how the rows are shared:

    - A catalogue name: its CSR cache (converted on first use, downloading the file if
      needed; concurrent callers wait for one conversion), split into ``size`` row ranges
      of about equal nonzeros plus rows, taken as memory maps.
    - A CSR cache directory: the same.
    - An uncompressed LIBSVM file: the rows whose first byte lies in byte range
      ``[rank * B // size, (rank + 1) * B // size)`` of its ``B`` bytes; ``n_features`` is
      required, since no rank sees the whole file.
    - A compressed file cannot be split by bytes (a rank would have to decompress all
      the data before its share): convert it once to a CSR cache (:func:`convert_svmlight`;
      catalogue datasets: :func:`convert` or ``sparcml-datasets convert``) and shard that,
      or decompress it.

    Parameters
    ----------
    name_or_path : str or path-like
        An uncompressed LIBSVM file, a CSR cache directory, or the name of a dataset of
        the catalogue (where no file of that name exists).
    rank : int
        The share to take, in ``[0, size)``; typically the MPI rank.
    size : int
        The number of shares, at least 1; typically the number of MPI ranks.
    n_features : int, optional
        The number of columns: required for a LIBSVM file (an index past it is an error);
        for a cache, it must be the cache's if given. Default None.
    data_home : str or path-like, optional
        The data home of a catalogue dataset (see :func:`data_home`); None (the default)
        means ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    catalog : Catalog or str or path-like, optional
        The catalogue of a dataset name: one read already, the path of a TOML file, or
        None (the default) for the one shipped with sparcml.

    Returns
    -------
    X : scipy.sparse.csr_matrix
        The rows of the share (memory-mapped from a cache).
    y : numpy.ndarray
        Their labels, float64 (a memory map from a cache).

    Raises
    ------
    ValueError
        If ``size`` is not a positive integer or ``rank`` not an integer in
        ``[0, size)``; if the file is compressed, or a LIBSVM file is given without
        ``n_features``, or ``n_features`` differs from a cache's; if a directory is not
        a CSR cache.
    FileNotFoundError
        If ``name_or_path`` is neither a file or directory nor a dataset of the catalogue.
    ParseError
        If a line of the share is malformed; it names the file and the line in it.
    ChecksumError, ContentError, DataHomeError, DownloadError
        As :func:`convert` raises them, for a catalogue dataset.

    See Also
    --------
    load_dask : The shards as the chunks of Dask arrays.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sparcml_apps.datasets import convert_svmlight, shard
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "rows.svm"
    >>> _ = path.write_text("+1 1:1\n-1 2:1\n+1 3:1\n-1 1:1 3:1\n")
    >>> for rank in range(3):
    ...     X, y = shard(path, rank, 3, n_features=3)
    ...     print(rank, X.shape, y)
    0 (2, 3) [ 1. -1.]
    1 (1, 3) [1.]
    2 (1, 3) [-1.]

    A CSR cache is shared by nonzeros plus rows:

    >>> _ = convert_svmlight(path, Path(folder.name) / "rows.csr")
    >>> [shard(Path(folder.name) / "rows.csr", rank, 2)[0].nnz for rank in range(2)]
    [2, 3]
    >>> folder.cleanup()
    """
    if not (isinstance(size, int | np.integer) and size >= 1):
        raise ValueError(f"size must be a positive integer; got {size!r}")
    if not (isinstance(rank, int | np.integer) and 0 <= rank < size):
        raise ValueError(f"rank must be an integer in [0, {size}); got {rank!r}")
    path = Path(name_or_path)
    if not path.exists():
        cat = catalogue_of(name_or_path, catalog)
        path = convert(str(name_or_path), data_home=data_home, catalog=cat, progress=False)
    if is_cache(path):
        return _cache_shard(path, rank, size, n_features)
    if path.is_dir():
        raise ValueError(f"{path}: expected a CSR cache directory (with manifest.json)")
    compression = sniff(path)
    if compression != "none":
        raise ValueError(
            f"{path}: {compression}-compressed data cannot be split by bytes; convert it "
            "once to a CSR cache (convert_svmlight, or convert for catalogue datasets) and "
            "shard that, or decompress it"
        )
    if n_features is None:
        raise ValueError(
            f"n_features is required to shard the text file {path}: each rank sees only its rows"
        )
    return _text_shard(path, rank, size, n_features)


def _cache_shard(path, rank, size, n_features):
    manifest = read_manifest(path)
    if n_features is not None and n_features != manifest["shape"][1]:
        raise ValueError(
            f"n_features must match the cache {path} ({manifest['shape'][1]}); got {n_features}"
        )
    n_rows, nnz = manifest["shape"][0], manifest["nnz"]
    indptr = np.load(path / "indptr.npy", mmap_mode="r")  # only the pages bisected are read
    # each row weighs its nonzeros plus one, so that empty rows are shared out too
    cuts = [
        bisect_left(range(n_rows + 1), r * (nnz + n_rows) // size, key=lambda i: int(indptr[i]) + i)
        for r in (rank, rank + 1)
    ]
    X, y, _ = read_cache(path, rows=cuts)
    return X, y


def _text_shard(path, rank, size, n_features):
    total = path.stat().st_size
    with open(path, "rb", buffering=0) as f:
        start = _line_start(f, rank * total // size)
        stop = _line_start(f, (rank + 1) * total // size)
    return to_csr(read_file(path, start=start, stop=stop, n_features=n_features), n_features)


def _line_start(f, position):
    """The first offset at or after ``position`` where a line starts (or the file size)."""
    if position == 0:
        return 0
    f.seek(position - 1)
    offset = position - 1
    while chunk := f.read(1 << 16):
        end = chunk.find(b"\n")
        if end >= 0:
            return offset + end + 1
        offset += len(chunk)
    return offset
