"""Where datasets live: the data home and the places of files inside it."""

import os
from pathlib import Path
from urllib.parse import quote

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
    base = mirror or os.environ.get(MIRROR_VARIABLE) or catalog.base_url
    if not base.endswith("/"):
        base += "/"
    return base + quote(dataset.file)
