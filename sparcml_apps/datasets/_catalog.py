"""The dataset catalogue: one record per LIBSVM file, read from ``catalog.toml``."""

import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

COMPRESSIONS = ("none", "gz", "bz2", "xz", "tar.xz")
DIGEST_LENGTHS = {"sha256": 64, "md5": 32}
_REQUIRED = ("name", "task", "split", "file", "compression", "n_samples", "n_features", "labels")
_OPTIONAL = ("nnz", "checksum", "member", "size", "notes")


@dataclass(frozen=True)
class Dataset:
    """One catalogue record: a file of the LIBSVM site and what it holds.

    :func:`read_catalog` makes these from the ``[[dataset]]`` records of a catalogue, and
    checks them; made by hand (as in examples) they are taken as they are.

    Parameters
    ----------
    name : str
        The name the dataset is known by (``load(name)``) and of its cache folder: a plain
        name, without ``/``, ``\\`` or ``..``; ``.t`` marks a test split.
    task : str
        ``"binary"`` for now.
    split : str
        ``"train"``, ``"test"`` or ``"all"`` (the file is the whole dataset).
    file : str
        The file name under the catalogue's ``base_url``, and in the data home's
        ``downloads/``: a plain name.
    compression : str
        ``"none"``, ``"gz"``, ``"bz2"``, ``"xz"`` or ``"tar.xz"``; checked against the
        file's first bytes.
    n_samples : int
        The rows, as published.
    n_features : int
        The columns of the converted matrix; a larger index in the file is an error.
    labels : tuple of int or float
        The label values in the file; any other label is an error.
    nnz : int, optional
        The nonzeros, where known (None, the default, where not).
    checksum : tuple of str, optional
        ``(algorithm, hex digest)`` of the file as published, ``algorithm`` being
        ``"sha256"`` or ``"md5"``; None (the default) where none is published.
    member : str, optional
        The path of the data inside a tar.xz archive (or its last part); only with
        ``compression="tar.xz"``. Default None.
    size : int, optional
        The bytes of the download, where known; default None.
    notes : str, default ""
        Where the data comes from; other published forms of the file.

    Examples
    --------
    >>> from sparcml_apps.datasets import read_catalog
    >>> a9a = read_catalog()["a9a"]
    >>> a9a.file, a9a.compression, a9a.n_samples, a9a.n_features, a9a.labels
    ('a9a', 'none', 32561, 123, (-1, 1))
    """

    name: str
    task: str
    split: str
    file: str
    compression: str
    n_samples: int
    n_features: int
    labels: tuple
    nnz: int | None = None
    checksum: tuple | None = None  # (algorithm, hex digest)
    member: str | None = None  # the file inside a tar archive
    size: int | None = None  # bytes of the download
    notes: str = ""


@dataclass(frozen=True)
class Catalog:
    """The records by name, the base URL they are found under, and where they were read.

    ``catalog[name]`` is the :class:`Dataset` of that name (a KeyError that lists the
    known names when there is none); iterating gives the records in the catalogue's order.

    Parameters
    ----------
    base_url : str
        The URL the files are found under: a file is fetched from ``base_url/<file>``.
    datasets : dict
        The records, :class:`Dataset` by name.
    source : str
        Where the catalogue was read from (errors name it).

    See Also
    --------
    read_catalog : Read and check a catalogue file.

    Examples
    --------
    >>> from sparcml_apps.datasets import Catalog, Dataset
    >>> tiny = Dataset("tiny", "binary", "all", "tiny.svm", "none", n_samples=2, n_features=3,
    ...                labels=(-1, 1))
    >>> catalog = Catalog("https://example.org/libsvm/", {"tiny": tiny}, "an example")
    >>> catalog["tiny"].n_features
    3
    >>> [dataset.name for dataset in catalog]
    ['tiny']
    >>> catalog["huge"]
    Traceback (most recent call last):
    ...
    KeyError: "no dataset 'huge' in the catalogue an example; known: tiny"
    """

    base_url: str
    datasets: dict
    source: str

    def __getitem__(self, name):
        try:
            return self.datasets[name]
        except KeyError:
            raise KeyError(
                f"no dataset {name!r} in the catalogue {self.source}; "
                f"known: {', '.join(self.datasets)}"
            ) from None

    def __iter__(self):
        return iter(self.datasets.values())


def read_catalog(path=None):
    """Read and check a catalogue of datasets, a TOML file of ``[[dataset]]`` records.

    The fields of a record are those of :class:`Dataset`, with ``checksum`` written as
    ``"sha256:<hex>"`` or ``"md5:<hex>"``; the file also gives the ``base_url``.

    Parameters
    ----------
    path : str or path-like, optional
        The catalogue file; None (the default) reads the one shipped with sparcml, which
        lists the LIBSVM benchmark files.

    Returns
    -------
    Catalog
        Its records by name.

    Raises
    ------
    FileNotFoundError
        If there is no file ``path``.
    ValueError
        If the file is not valid TOML, has no ``base_url``, no records, a record with a
        missing, unknown or invalid field, or two records of one name.

    Examples
    --------
    >>> from sparcml_apps.datasets import read_catalog
    >>> catalog = read_catalog()
    >>> catalog.base_url
    'https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/'
    >>> catalog["url"].n_samples, catalog["url"].n_features
    (2396130, 3231961)

    Another catalogue, from a file:

    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "catalog.toml"
    >>> _ = path.write_text('''
    ... base_url = "https://example.org/libsvm/"
    ... [[dataset]]
    ... name = "tiny"
    ... task = "binary"
    ... split = "all"
    ... file = "tiny.svm.xz"
    ... compression = "xz"
    ... n_samples = 2
    ... n_features = 3
    ... labels = [-1, 1]
    ... ''')
    >>> [dataset.file for dataset in read_catalog(path)]
    ['tiny.svm.xz']
    >>> _ = path.write_text(path.read_text().replace('"xz"', '"zip"'))
    >>> read_catalog(path)
    Traceback (most recent call last):
    ...
    ValueError: .../catalog.toml: dataset #1 (tiny): 'compression' must be one of ...
    >>> folder.cleanup()
    """
    if path is None:
        resource = resources.files("sparcml_apps._catalog").joinpath("catalog.toml")
        source, raw = str(resource), resource.read_bytes()
    else:
        source, raw = str(path), Path(path).read_bytes()
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{source}: not a valid TOML file: {exc}") from None
    base_url = document.get("base_url")
    if not isinstance(base_url, str) or not base_url:
        raise ValueError(f"{source}: 'base_url' must be a URL string; got {base_url!r}")
    datasets = {}
    for number, record in enumerate(document.get("dataset", []), 1):
        entry = _check_record(record, f"{source}: dataset #{number}")
        if entry.name in datasets:
            raise ValueError(f"{source}: dataset name {entry.name!r} appears twice")
        datasets[entry.name] = entry
    if not datasets:
        raise ValueError(f"{source}: expected [[dataset]] records; found none")
    return Catalog(base_url, datasets, source)


def _check_record(record, where):
    where = f"{where} ({record.get('name', '?')})"
    missing = [key for key in _REQUIRED if key not in record]
    unknown = sorted(set(record) - set(_REQUIRED) - set(_OPTIONAL))
    if missing:
        raise ValueError(f"{where}: missing fields {missing}")
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}; known: {_REQUIRED + _OPTIONAL}")
    for key in ("name", "task", "split", "file", "compression", "notes", "member"):
        if key in record and not (isinstance(record[key], str) and record[key]):
            raise ValueError(f"{where}: {key!r} must be a non-empty string; got {record[key]!r}")
    for key in ("name", "file"):
        _check_file_name(record[key], key, where)
    if "member" in record:
        _check_member(record["member"], where)
    for key in ("n_samples", "n_features", "nnz", "size"):
        value = record.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{where}: {key!r} must be a positive integer; got {value!r}")
    if record["compression"] not in COMPRESSIONS:
        raise ValueError(
            f"{where}: 'compression' must be one of {COMPRESSIONS}; got {record['compression']!r}"
        )
    if ("member" in record) != (record["compression"] == "tar.xz"):
        raise ValueError(f"{where}: 'member' names the file in a tar.xz archive, and only there")
    labels = record["labels"]
    if not (
        isinstance(labels, list)
        and labels
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in labels)
    ):
        raise ValueError(f"{where}: 'labels' must be a non-empty list of numbers; got {labels!r}")
    fields = {key: record[key] for key in _REQUIRED + _OPTIONAL if key in record}
    fields["labels"] = tuple(labels)
    if "checksum" in record:
        fields["checksum"] = parse_checksum(record["checksum"], where)
    return Dataset(**fields)


def _check_file_name(value, key, where):
    """A name that becomes a file or a folder in the data home: one plain name."""
    if value in (".", "..") or any(c in value for c in "/\\\0"):
        raise ValueError(
            f"{where}: {key!r} must be a plain file name, without '/', '\\', NUL or "
            f"'..' (it names a file in the data home); got {value!r}"
        )


def _check_member(value, where):
    """A path in a tar archive: relative, and never above the archive's top."""
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or any(c in value for c in "\\\0"):
        raise ValueError(
            f"{where}: 'member' must be a relative path in the archive, without '..', "
            f"'\\' or NUL; got {value!r}"
        )


def parse_checksum(text, where):
    """``"sha256:<hex>"`` or ``"md5:<hex>"`` as ``(algorithm, hex)``."""
    algorithm, _, digest = str(text).partition(":")
    digest = digest.lower()
    if (
        algorithm not in DIGEST_LENGTHS
        or len(digest) != DIGEST_LENGTHS[algorithm]
        or any(c not in "0123456789abcdef" for c in digest)
    ):
        raise ValueError(
            f"{where}: 'checksum' must be 'sha256:<64 hex digits>' or 'md5:<32 hex digits>'; "
            f"got {text!r}"
        )
    return algorithm, digest
