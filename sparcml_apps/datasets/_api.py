"""The catalogue's datasets by name: download, verify, convert to the CSR cache, load."""

import warnings

from filelock import FileLock

from ._cache import is_cache, read_cache, write_cache
from ._catalog import read_catalog
from ._compression import open_data
from ._download import fetch, file_digest, progress_bar
from ._errors import ChecksumError
from ._home import cache_path, data_home, download_path, manifest_path, source_url
from ._recorded import record, recorded
from ._svmlight import iter_pieces


def download(name, *, data_home=None, mirror=None, force=False, progress=True, catalog=None):
    """Download the file of dataset ``name`` into the data home, once; return its path.

    ``mirror`` replaces the catalogue's base URL (default ``$SPARCML_DATASETS_MIRROR``).
    ``force`` downloads again. A file with no published checksum has the sha256 of its
    first download recorded (with a warning) and checked from then on. Safe to call from
    several processes at once: one downloads, the others wait for it.
    """
    cat, dataset, home = _resolve(name, catalog, data_home)
    return _fetch_file(cat, dataset, home, mirror, force, progress)


def verify(name, *, data_home=None, progress=True, catalog=None):
    """Check the downloaded file of dataset ``name`` against its checksum.

    Returns ``"algorithm:hex"``; raises ChecksumError on a mismatch, FileNotFoundError when
    the file is not downloaded.
    """
    _, dataset, home = _resolve(name, catalog, data_home)
    target = _downloaded(home, dataset)
    known = _known_checksum(home, dataset)
    algorithm = known[0] if known else "sha256"
    hexdigest = file_digest(target, algorithm, progress)
    if known and hexdigest != known[1]:
        raise ChecksumError(target, algorithm, known[1], hexdigest)
    if known is None:
        _record(home, dataset, hexdigest, str(target))
    return f"{algorithm}:{hexdigest}"


def convert(
    name, *, data_home=None, mirror=None, force=False, download=True, progress=True, catalog=None
):
    """Convert dataset ``name`` to its memory-mappable CSR cache, once; return the directory.

    The file is downloaded first when missing (unless ``download`` is False). Columns are
    the catalogue's ``n_features``; labels must be among its ``labels``. ``force``
    converts again. Safe to call from several processes at once.
    """
    cat, dataset, home = _resolve(name, catalog, data_home)
    dest = cache_path(home, dataset)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{dest}.lock"):
        if is_cache(dest) and not force:
            return dest
        if download:
            source = _fetch_file(cat, dataset, home, mirror, False, progress)
        else:
            source = _downloaded(home, dataset)
        known = _known_checksum(home, dataset)
        info = {
            "dataset": dataset.name,
            "source": dataset.file,
            "member": dataset.member,
            "source_checksum": f"{known[0]}:{known[1]}" if known else None,
        }
        described = f"{source}:{dataset.member}" if dataset.member else str(source)
        with (
            open_data(source, dataset.compression, dataset.member) as (stream, raw),
            progress_bar(source.stat().st_size, 0, f"convert {dataset.name}", progress) as bar,
        ):
            pieces = iter_pieces(
                stream,
                described,
                n_features=dataset.n_features,
                classes=dataset.labels,
                on_block=lambda: bar.update(raw.tell() - bar.n),
            )
            manifest = write_cache(pieces, dest, n_features=dataset.n_features, info=info)
    _compare(dataset, manifest)
    return dest


def load(name, *, data_home=None, download=True, mirror=None, progress=True, catalog=None):
    """``(X, y)`` of dataset ``name``: a CSR matrix and float64 labels, memory-mapped from
    the CSR cache, which is made (and the file downloaded) on first use."""
    cache = convert(
        name,
        data_home=data_home,
        mirror=mirror,
        download=download,
        progress=progress,
        catalog=catalog,
    )
    X, y, _ = read_cache(cache)
    return X, y


def dataset_url(name, *, mirror=None, catalog=None):
    """The URL the file of dataset ``name`` is downloaded from (see ``download``)."""
    cat, dataset, _ = _resolve(name, catalog, None)
    return source_url(cat, dataset, mirror)


def dataset_path(name, *, data_home=None, cache=False, catalog=None):
    """Where the downloaded file of dataset ``name`` (with ``cache``: its CSR cache
    directory) is kept, whether or not it is there yet."""
    _, dataset, home = _resolve(name, catalog, data_home)
    return cache_path(home, dataset) if cache else download_path(home, dataset)


def _resolve(name, catalog, home):
    cat = catalog if hasattr(catalog, "datasets") else read_catalog(catalog)
    return cat, cat[name], data_home(home)


def _fetch_file(cat, dataset, home, mirror, force, progress):
    target = download_path(home, dataset)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{target}.lock"):
        if force:
            target.unlink(missing_ok=True)
        if target.exists():
            return target
        url = source_url(cat, dataset, mirror)
        known = _known_checksum(home, dataset)
        hexdigest = fetch(url, target, checksum=known, size=dataset.size, progress=progress)
        if known is None:
            _record(home, dataset, hexdigest, url)
    return target


def _downloaded(home, dataset):
    target = download_path(home, dataset)
    if not target.exists():
        raise FileNotFoundError(
            f"{target}: dataset {dataset.name!r} is not downloaded; "
            f"run `sparcml-datasets download {dataset.name}`"
        )
    return target


def _known_checksum(home, dataset):
    if dataset.checksum:
        return dataset.checksum
    sha256 = recorded(home, dataset.file)
    return ("sha256", sha256) if sha256 else None


def _record(home, dataset, hexdigest, origin):
    record(home, dataset.file, hexdigest, origin)
    warnings.warn(
        f"{dataset.file} has no published checksum: recorded sha256 {hexdigest} "
        f"in {manifest_path(home)}; it is checked from now on",
        stacklevel=3,
    )


def _compare(dataset, manifest):
    rows, nnz = manifest["shape"][0], manifest["nnz"]
    if rows != dataset.n_samples or (dataset.nnz is not None and nnz != dataset.nnz):
        warnings.warn(
            f"{dataset.name}: the file holds {rows} rows and {nnz} nonzeros; the catalogue "
            f"lists {dataset.n_samples} rows and {dataset.nnz or 'unknown'} nonzeros",
            stacklevel=3,
        )
