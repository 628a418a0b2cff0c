"""Datasets as Dask arrays: each chunk is one shard, read by the worker that computes it."""

from functools import partial
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._cache import is_cache, read_manifest
from ._shards import catalogue_of, shard


def from_shards(load, n_chunks, n_features, *, dtype=np.float64, name="shard"):
    """``(X, y)``: Dask arrays whose chunk ``i`` is ``load(i, n_chunks)``, an ``(X, y)`` pair
    of a CSR matrix of ``n_features`` columns and its labels.

    Nothing is read here: each chunk is made where Dask computes it. The rows of a chunk
    are known only then, so the arrays have chunks of unknown size (``nan``) along rows.
    ``load`` must be picklable (a module-level function or a ``functools.partial`` of one).
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
    """``(X, y)`` of a dataset as Dask arrays of ``n_chunks`` row chunks, read by the workers.

    Chunk ``i`` is ``shard(name_or_path, i, n_chunks)`` (see :func:`shard`): a byte range
    of an uncompressed LIBSVM file (``n_features`` required) or a row range of a CSR cache
    (a catalogue name is converted on first use, by the workers). This process reads no
    data, at most a cache's manifest. ``n_chunks`` defaults to the number of workers of
    the active Dask client. ``X`` has scipy CSR chunks; rows per chunk are unknown (nan)
    until computed.
    """
    width = column_count(name_or_path, n_features, data_home, catalog)
    if n_chunks is None:
        n_chunks = _n_workers()
    load = partial(
        _shard, str(name_or_path), n_features=width, data_home=data_home, catalog=catalog
    )
    return from_shards(load, n_chunks, width, name=f"load-{Path(str(name_or_path)).name}")


def _shard(name_or_path, rank, size, n_features, data_home, catalog):
    X, y = shard(name_or_path, rank, size, n_features, data_home=data_home, catalog=catalog)
    return X, np.asarray(y)


def column_count(name_or_path, n_features, data_home, catalog):
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
