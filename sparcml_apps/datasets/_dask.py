"""Datasets as Dask arrays: each chunk is one shard, read by the worker that computes it."""

from functools import partial
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._cache import is_cache, read_manifest
from ._shards import catalogue_of, shard


def from_shards(load, n_chunks, n_features, *, dtype=np.float64, name="shard"):
    """Dask arrays ``(X, y)`` whose chunk ``i`` is what ``load(i, n_chunks)`` returns.

    Nothing is read here: each chunk is made where Dask computes it. The rows of a chunk
    are known only then, so the arrays have chunks of unknown size (``nan``) along rows.

    Parameters
    ----------
    load : callable
        ``load(i, n_chunks)`` returns chunk ``i`` as ``(X, y)``: a scipy CSR matrix of
        ``n_features`` columns and its float64 labels, a numpy array. It must be picklable
        (a module-level function or a ``functools.partial`` of one) to run on workers.
    n_chunks : int
        The number of chunks, at least 1.
    n_features : int
        The number of columns of every chunk.
    dtype : numpy dtype, default numpy.float64
        The dtype of the values of ``X``.
    name : str, default "shard"
        The prefix of the Dask keys of the chunks, ``name-i-n_chunks``: calls with the
        same name and chunk count make the same keys, so arrays of different data need
        different names.

    Returns
    -------
    X : dask.array.Array
        The rows, of ``n_features`` columns, with scipy CSR chunks.
    y : dask.array.Array
        The labels, float64.

    Raises
    ------
    ValueError
        If ``n_chunks`` is not a positive integer.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from sparcml_apps.datasets import from_shards
    >>> def load(i, n_chunks):
    ...     return sp.csr_matrix(np.full((i + 1, 2), i + 1.0)), np.full(i + 1, float(i))
    >>> X, y = from_shards(load, 3, 2)
    >>> X.shape
    (nan, 2)
    >>> X.compute().toarray().sum(axis=0), y.compute()
    (array([14., 14.]), array([0., 1., 1., 2., 2., 2.]))
    """
    import dask
    import dask.array as da

    if not (isinstance(n_chunks, int | np.integer) and n_chunks >= 1):
        raise ValueError(f"n_chunks must be a positive integer; got {n_chunks!r}")
    pieces = [
        dask.delayed(load, pure=True, nout=2)(i, n_chunks, dask_key_name=f"{name}-{i}-{n_chunks}")
        for i in range(n_chunks)
    ]
    meta = sp.csr_matrix((0, n_features), dtype=dtype)
    X = da.concatenate(
        [da.from_delayed(p[0], (np.nan, n_features), dtype, meta=meta) for p in pieces]
    )
    y = da.concatenate(
        [da.from_delayed(p[1], (np.nan,), np.float64, meta=np.empty(0)) for p in pieces]
    )
    return X, y


def load_dask(name_or_path, *, n_features=None, n_chunks=None, data_home=None, catalog=None):
    r"""A dataset as Dask arrays ``(X, y)`` of row chunks, read by the workers.

    Chunk ``i`` is ``shard(name_or_path, i, n_chunks)`` (see :func:`shard`): a byte range
    of an uncompressed LIBSVM file or a row range of a CSR cache (a catalogue name is
    converted on first use, by the workers). This process reads no data, at most a cache's
    manifest. The rows of a chunk are unknown (``nan``) until it is computed; errors in
    reading a chunk (those of :func:`shard`) are raised then.

    Parameters
    ----------
    name_or_path : str or path-like
        An uncompressed LIBSVM file, a CSR cache directory, or the name of a dataset of
        the catalogue.
    n_features : int, optional
        The number of columns: required for a LIBSVM file; None (the default) takes a
        cache's, or a catalogue dataset's.
    n_chunks : int, optional
        The number of chunks; None (the default) means the number of workers of the
        active Dask client.
    data_home : str or path-like, optional
        The data home of a catalogue dataset (see :func:`data_home`); None (the default)
        means ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    catalog : Catalog or str or path-like, optional
        The catalogue of a dataset name: one read already, the path of a TOML file, or
        None (the default) for the one shipped with sparcml.

    Returns
    -------
    X : dask.array.Array
        The rows, with scipy CSR chunks.
    y : dask.array.Array
        The labels, float64.

    Raises
    ------
    ValueError
        If a LIBSVM file is given without ``n_features``, if ``n_chunks`` is None and no
        Dask client is active, or if ``n_chunks`` is not a positive integer.
    FileNotFoundError
        If ``name_or_path`` is neither a file or directory nor a dataset of the catalogue.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sparcml_apps.datasets import load_dask
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "rows.svm"
    >>> _ = path.write_text("+1 1:1\n-1 2:1\n+1 3:1\n-1 1:1 3:1\n")
    >>> X, y = load_dask(path, n_features=3, n_chunks=2)
    >>> X.shape, X.numblocks
    ((nan, 3), (2, 1))
    >>> X.compute().nnz, y.compute()
    (5, array([ 1., -1.,  1., -1.]))
    >>> load_dask("a9a", n_chunks=8)  # doctest: +SKIP
    """
    width = column_count(name_or_path, n_features, catalog)
    if n_chunks is None:
        n_chunks = _n_workers()
    load = partial(
        _shard, str(name_or_path), n_features=width, data_home=data_home, catalog=catalog
    )
    return from_shards(load, n_chunks, width, name=f"load-{Path(str(name_or_path)).name}")


def _shard(name_or_path, rank, size, n_features, data_home, catalog):
    X, y = shard(name_or_path, rank, size, n_features, data_home=data_home, catalog=catalog)
    return X, np.asarray(y)


def column_count(name_or_path, n_features, catalog):
    """The column count, from ``n_features``, a cache's manifest or the catalogue."""
    path = Path(name_or_path)
    if is_cache(path):
        return read_manifest(path)["shape"][1] if n_features is None else n_features
    if path.exists():
        if n_features is None:
            raise ValueError(
                f"n_features is required to load the file {path} in chunks: each worker "
                "sees only its rows"
            )
        return n_features
    cat = catalogue_of(name_or_path, catalog)
    return cat[str(name_or_path)].n_features if n_features is None else n_features


def _n_workers():
    from distributed import default_client

    try:
        client = default_client()
    except ValueError:
        raise ValueError(
            "n_chunks is required when no Dask client is active (it defaults to the "
            "number of workers)"
        ) from None
    return len(client.scheduler_info(n_workers=-1)["workers"])
