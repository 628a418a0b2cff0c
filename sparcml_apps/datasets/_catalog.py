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
    """One catalogue record: a file of the LIBSVM site and what it holds."""

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
    """The records by name, the base URL they are found under, and where they were read."""

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
    """Read and check a catalogue: ``path``, or the one shipped with sparcml."""
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
