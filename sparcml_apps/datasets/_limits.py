"""What a dataset's file may put on the disk: no more rows or nonzeros than the catalogue
lists, and a conversion starts only where its cache fits."""

import shutil

from ._cache import INT32_MAX
from ._errors import ContentError, DataHomeError
from ._home import HOME_VARIABLE


def most_nonzeros(dataset):
    """The nonzeros ``dataset``'s file may hold: the catalogue's ``nnz``, else one a
    column of every row (a column appears once in a row)."""
    return dataset.nnz or dataset.n_samples * dataset.n_features


def bounded(pieces, dataset, source):
    """The parsed ``pieces`` of ``dataset``'s file ``source``, stopped with ContentError
    as soon as they pass the rows or the nonzeros the catalogue lists: nothing past them
    reaches the caller (or the disk)."""
    rows = nnz = 0
    most = most_nonzeros(dataset)
    for piece in pieces:
        rows += piece.row_nnz.size
        nnz += piece.indices.size
        if rows > dataset.n_samples or nnz > most:
            listed = f"{dataset.n_samples:,} rows" + (
                f" and {dataset.nnz:,} nonzeros" if dataset.nnz else ""
            )
            raise ContentError(
                f"{source}: holds more than the {listed} the catalogue lists for "
                f"{dataset.name}: stopped at {rows:,} rows and {nnz:,} nonzeros read"
            )
        yield piece


def cache_bytes(dataset):
    """The bytes of ``dataset``'s CSR cache, from the catalogue's rows and nonzeros (one a
    row where it lists none: then a lower bound)."""
    nnz = dataset.nnz or dataset.n_samples
    index = 4 if dataset.n_features <= INT32_MAX and nnz <= INT32_MAX else 8
    # indptr is written as int64 (then narrowed), labels and values as float64
    return (dataset.n_samples + 1) * 8 + dataset.n_samples * 8 + nnz * (index + 8)


def check_room(dataset, folder):
    """Raise DataHomeError when the disk of ``folder`` has no room for ``dataset``'s
    CSR cache (:func:`cache_bytes`)."""
    need, free = cache_bytes(dataset), shutil.disk_usage(folder).free
    if need > free:
        nonzeros = f"{dataset.nnz:,} nonzeros" if dataset.nnz else "at least a nonzero a row"
        raise DataHomeError(
            f"{folder}: the CSR cache of {dataset.name} takes {need / 1e6:,.1f} MB "
            f"({dataset.n_samples:,} rows and {nonzeros}, as the catalogue lists); the disk "
            f"has {free / 1e6:,.1f} MB free: free some, or give another data home with "
            f"--data-home or ${HOME_VARIABLE}"
        )
