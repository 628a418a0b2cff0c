"""Where datasets live: the data home and the places of files inside it."""

import os
from pathlib import Path
from urllib.parse import quote, urlsplit

HOME_VARIABLE = "SPARCML_DATA_HOME"
"""The environment variable that names the data home when no ``data_home`` is given."""
MIRROR_VARIABLE = "SPARCML_DATASETS_MIRROR"
"""The environment variable whose URL replaces the catalogue's base URL when no ``mirror``
is given."""
DEFAULT_HOME = "~/sparcml_data"
"""The data home when neither ``data_home`` nor ``$SPARCML_DATA_HOME`` names one."""


def data_home(data_home=None):
    """The folder datasets are downloaded to and converted in: the data home.

    It holds ``downloads/`` (the files as downloaded), ``csr/`` (their CSR caches) and
    ``checksums.json`` (the sha256 recorded for files without a published checksum).
    Nothing is read or made here.

    Parameters
    ----------
    data_home : str or path-like, optional
        The data home; None (the default) or ``""`` means ``$SPARCML_DATA_HOME``, else
        ``~/sparcml_data``. A leading ``~`` is expanded.

    Returns
    -------
    pathlib.Path
        The data home.

    Examples
    --------
    >>> import os
    >>> from pathlib import Path
    >>> from unittest import mock
    >>> from sparcml_apps.datasets import data_home
    >>> data_home("/srv/sparcml")
    PosixPath('/srv/sparcml')
    >>> data_home("~/data") == Path.home() / "data"
    True
    >>> with mock.patch.dict(os.environ, {"SPARCML_DATA_HOME": "/scratch/sparcml"}):
    ...     data_home()
    PosixPath('/scratch/sparcml')
    """
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
