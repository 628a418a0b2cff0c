"""The steps behind the catalogue's calls (:mod:`._api`): find a dataset, fetch its file,
check it against its checksum and the catalogue's counts, convert it to the CSR cache,
and record what was checked."""

import hashlib
import warnings
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

from ._cache import is_cache, read_manifest, write_cache
from ._catalog import read_catalog
from ._compression import open_data
from ._download import fetch, file_digest, progress_bar, read_progress
from ._errors import ChecksumError, ContentError, DataHomeError, ParseError
from ._files import write_lock
from ._home import data_home, download_path, manifest_path, source_url
from ._limits import bounded
from ._recorded import record, recorded
from ._svmlight import iter_pieces


class Checksum(NamedTuple):
    """The digest a dataset's file must have, and where it comes from (for errors)."""

    algorithm: str
    hexdigest: str
    published: bool
    origin: str


def resolve(name, catalog, home):
    cat = catalog if hasattr(catalog, "datasets") else read_catalog(catalog)
    return cat, cat[name], data_home(home)


def fetch_file(cat, dataset, home, mirror, force, progress, *, cache=None):
    """Download the file of ``dataset`` unless it is there (then verify it); return
    whether ``cache`` was made. A download without a known checksum is parsed before it
    is kept, and converted to ``cache`` (if given, with its lock held) while at it."""
    target = download_path(home, dataset)
    if not force and target.exists():
        check_file(cat, dataset, home, target, progress)
        return False
    url = source_url(cat, dataset, mirror)
    with write_lock(home, target):
        if not force and target.exists():  # another process has just downloaded it
            return False
        known = known_checksum(cat, dataset, home)
        fetch(
            url,
            target,
            checksum=known[:2] if known else None,
            origin=known.origin if known else None,
            size=dataset.size,
            accept=None
            if known
            else partial(accept_unlisted, cat, dataset, home, url, progress, cache),
            progress=progress,
        )
    return cache is not None and known is None


def accept_unlisted(cat, dataset, home, url, progress, cache, part, hexdigest):
    """Keep a download without a checksum only if it holds the dataset; record it."""
    try:
        if cache is not None:  # checks and records as it converts
            convert_file(cat, dataset, home, part, cache, progress, name=url)
            return
        rows, nnz, _ = count_rows(dataset, part, url, progress)
        check_counts(dataset, url, rows, nnz)
    except (ContentError, ParseError) as exc:
        raise ContentError(
            f"{exc}; with no published checksum, a download is kept only if it parses as "
            "the catalogue describes it: it was deleted and nothing recorded"
        ) from None
    record_checksum(home, dataset, hexdigest, url)


def check_file(cat, dataset, home, path, progress):
    """Verify the file ``path`` of ``dataset`` already in the data home; its digest."""
    known = known_checksum(cat, dataset, home)
    again = f"`sparcml-datasets download {dataset.name} --force` fetches it again"
    if known:
        hexdigest = file_digest(path, known.algorithm, progress)
        if hexdigest != known.hexdigest:
            raise ChecksumError(
                path, known.algorithm, known.hexdigest, hexdigest, known.origin, again
            )
        return f"{known.algorithm}:{hexdigest}"
    try:
        rows, nnz, hexdigest = count_rows(dataset, path, str(path), progress)
        check_counts(dataset, path, rows, nnz)
    except (ContentError, ParseError) as exc:
        raise ContentError(f"{exc}; {again}") from None
    try:
        record_checksum(home, dataset, hexdigest, str(path))
    except DataHomeError as exc:
        warnings.warn(f"{dataset.file} parsed as described; not recorded: {exc}", stacklevel=3)
    return f"sha256:{hexdigest}"


def count_rows(dataset, path, name, progress):
    """``(rows, nonzeros, sha256)`` of the file ``path`` of ``dataset``, parsed as the
    catalogue describes it; errors name the file ``name``."""
    with reading(dataset, path, name, hashlib.sha256(), "check", progress) as (pieces, raw):
        rows = nnz = 0
        for piece in pieces:
            rows += piece.row_nnz.size
            nnz += piece.indices.size
        return rows, nnz, raw.finish()


def convert_file(cat, dataset, home, source, dest, progress, name=None):
    """Write the CSR cache ``dest`` from the file ``source`` (``name`` in errors and
    records), checked as it is read."""
    known = known_checksum(cat, dataset, home)
    digest = hashlib.new(known.algorithm if known else "sha256")
    name = name or str(source)
    described = f"{name}:{dataset.member}" if dataset.member else name
    info = {"dataset": dataset.name, "source": dataset.file, "member": dataset.member}
    with reading(dataset, source, name, digest, "convert", progress, described) as (
        pieces,
        raw,
    ):

        def same_file():
            """The digest of the whole file, which must be the known one, if any."""
            hexdigest = raw.finish()
            if known and hexdigest != known.hexdigest:
                raise ChecksumError(
                    source,
                    known.algorithm,
                    known.hexdigest,
                    hexdigest,
                    known.origin,
                    f"the file changed after its download: `sparcml-datasets download "
                    f"{dataset.name} --force` fetches it again",
                )
            return hexdigest

        def check(manifest):
            hexdigest = same_file()
            rows, nnz = manifest["shape"][0], manifest["nnz"]
            if known and known.published:  # the file is the published one: the figures err
                if message := counts_differ(dataset, rows, nnz):
                    warnings.warn(f"{dataset.name}: {message}", stacklevel=6)
            else:
                check_counts(dataset, name, rows, nnz)
            if not known:
                record_checksum(home, dataset, hexdigest, name)
            manifest["source_checksum"] = f"{digest.name}:{hexdigest}"

        try:
            return write_cache(pieces, dest, n_features=dataset.n_features, info=info, check=check)
        except ContentError:
            if known:  # too many rows in a file that changed: the change is the error
                same_file()
            raise


@contextmanager
def reading(dataset, path, name, digest, verb, progress, described=None):
    """``(pieces, raw)``: the pieces of the LIBSVM rows of the file ``path`` of
    ``dataset``, with the catalogue's columns and labels, stopped once they pass its
    counts, and the reader of its bytes, which feeds ``digest``; errors name the file
    ``name`` (its rows ``described``, if given); the progress bar says ``verb``."""
    with (
        open_data(path, dataset.compression, dataset.member, digest=digest, name=name) as (
            stream,
            raw,
        ),
        progress_bar(path.stat().st_size, 0, f"{verb} {dataset.name}", progress) as bar,
    ):
        described = described or name
        pieces = iter_pieces(
            stream,
            described,
            n_features=dataset.n_features,
            classes=dataset.labels,
            on_block=read_progress(bar, raw),
            threads=None,
        )
        yield bounded(pieces, dataset, described), raw


def is_current(cat, dataset, home, dest):
    """Whether ``dest`` is a CSR cache made from the file the known checksum names."""
    if not is_cache(dest):
        return False
    known = known_checksum(cat, dataset, home)
    if known is None:
        return True
    try:
        made_from = read_manifest(dest).get("source_checksum")
    except ValueError:
        return False
    return made_from == f"{known.algorithm}:{known.hexdigest}"


def downloaded_path(home, dataset):
    target = download_path(home, dataset)
    if not target.exists():
        raise FileNotFoundError(
            f"{target}: dataset {dataset.name!r} is not downloaded; "
            f"run `sparcml-datasets download {dataset.name}`"
        )
    return target


def known_checksum(cat, dataset, home):
    if dataset.checksum:
        return Checksum(*dataset.checksum, True, f"published in the catalogue {cat.source}")
    sha256 = recorded(home, dataset.file)
    if sha256 is None:
        return None
    origin = (
        f"recorded at its first download in {manifest_path(home)}; "
        f"`sparcml-datasets forget {dataset.name}` forgets it"
    )
    return Checksum("sha256", sha256, False, origin)


def record_checksum(home, dataset, hexdigest, origin):
    record(home, dataset.file, hexdigest, origin)
    warnings.warn(
        f"{dataset.file} has no published checksum: recorded sha256 {hexdigest} "
        f"in {manifest_path(home)}; it is checked from now on",
        stacklevel=3,
    )


def check_counts(dataset, source, rows, nnz):
    if message := counts_differ(dataset, rows, nnz):
        raise ContentError(f"{source}: {message}")


def counts_differ(dataset, rows, nnz):
    """What differs between the rows and nonzeros of a file and the catalogue's, or None."""
    if rows == dataset.n_samples and dataset.nnz in (None, nnz):
        return None
    listed = f"{dataset.n_samples} rows" + (f" and {dataset.nnz} nonzeros" if dataset.nnz else "")
    return f"the catalogue lists {listed}; the file holds {rows} rows and {nnz} nonzeros"
