"""Where datasets live: the data home and the places of files inside it."""

import os
from pathlib import Path
from urllib.parse import quote, urlsplit

HOME_VARIABLE = "SPARCML_DATA_HOME"
MIRROR_VARIABLE = "SPARCML_DATASETS_MIRROR"
DEFAULT_HOME = "~/sparcml_data"


def data_home(data_home=None):
    """The data home: ``data_home``, else ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``."""
    chosen = data_home or os.environ.get(HOME_VARIABLE) or DEFAULT_HOME
    return Path(chosen).expanduser()


def download_path(home, dataset):
    """Where the file of ``dataset`` is kept once downloaded and verified."""
    return home / "downloads" / dataset.file


def cache_path(home, dataset):
    """The directory of the CSR cache of ``dataset``."""
    return home / "csr" / dataset.name


def manifest_path(home):
    """The local record of the sha256 of downloads that have no published checksum."""
    return home / "checksums.json"


def source_url(catalog, dataset, mirror=None):
    """The URL of ``dataset``'s file: under ``mirror``, ``$SPARCML_DATASETS_MIRROR`` or the
    catalogue's base URL."""
    if mirror:
        base, name = mirror, "mirror"
    elif os.environ.get(MIRROR_VARIABLE):
        base, name = os.environ[MIRROR_VARIABLE], f"${MIRROR_VARIABLE}"
    else:
        base, name = catalog.base_url, f"base_url of {catalog.source}"
    check_url(base, name)
    if not base.endswith("/"):
        base += "/"
    return base + quote(dataset.file)


def check_url(url, name):
    """Raise ValueError unless ``url`` is an http:// or https:// URL with a host; ``name``
    says where it came from."""
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{name} must be an http:// or https:// URL; got {url!r}")
