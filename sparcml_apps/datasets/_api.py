"""The catalogue's datasets by name: download, verify, convert to the CSR cache, load.

Only writers (a download, a conversion, a change of the record of checksums) take a lock
in the data home; readers take none, so a data home that already holds what is asked for
may be read-only.
"""

from ._cache import read_cache
from ._files import write_lock
from ._home import cache_path, download_path, source_url
from ._limits import check_room
from ._recorded import forget as forget_record
from ._stages import check_file, convert_file, downloaded_path, fetch_file, is_current, resolve


def download(name, *, data_home=None, mirror=None, force=False, progress=True, catalog=None):
    r"""Download the file of a catalogue dataset into the data home, once.

    A file already there is verified instead (see :func:`verify`). The download goes to a
    ``.part`` file beside its place (an interrupted one is resumed), is checked, and is
    renamed into place. A file with no published checksum is kept only if it parses as the
    catalogue describes it (compression, labels, columns, rows and, where listed,
    nonzeros); then its sha256 is recorded in the data home (with a warning) and checked
    from then on. Safe to call from several processes at once: one downloads, the others
    wait for it.

    Parameters
    ----------
    name : str
        The name of a dataset in the catalogue, such as ``"a9a"``.
    data_home : str or path-like, optional
        The data home (see :func:`data_home`); None (the default) means
        ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    mirror : str, optional
        An http:// or https:// URL that replaces the catalogue's ``base_url``: the file is
        fetched from ``mirror/<file>``. None (the default) means
        ``$SPARCML_DATASETS_MIRROR``, else the catalogue's ``base_url``.
    force : bool, default False
        Download again even if the file is there; the file there is replaced only once
        the new one is verified.
    progress : bool, default True
        Show a progress bar on a terminal (none where stderr is not one).
    catalog : Catalog or str or path-like, optional
        The catalogue that describes ``name``: one read already (:func:`read_catalog`), the
        path of a TOML file, or None (the default) for the one shipped with sparcml.

    Returns
    -------
    pathlib.Path
        The downloaded file, ``<data home>/downloads/<file>``.

    Raises
    ------
    KeyError
        If the catalogue has no dataset ``name``.
    ValueError
        If ``mirror`` (or the URL it falls back to) is not an http:// or https:// URL.
    DownloadError
        If the transfer fails for good: an HTTP error, a size other than the catalogue's,
        or retries used up.
    ChecksumError
        If the file (downloaded, or already there) does not have its published or
        recorded checksum.
    ContentError
        If a file without a known checksum does not parse as the catalogue describes it;
        a new download is then deleted and nothing is recorded.
    DataHomeError
        If the data home cannot be written, or the disk has no room for the file.

    See Also
    --------
    load : Download, convert and load in one call.
    dataset_url : Where the file is downloaded from.

    Examples
    --------
    >>> from sparcml_apps.datasets import download
    >>> download("a9a")  # doctest: +SKIP
    PosixPath('/home/me/sparcml_data/downloads/a9a')

    A file already in its place is verified, not downloaded again:

    >>> import hashlib, tempfile
    >>> from sparcml_apps.datasets import Catalog, Dataset, dataset_path, download
    >>> text = b"+1 1:0.5 3:1\n-1 2:2\n"
    >>> tiny = Dataset("tiny", "binary", "all", "tiny.svm", "none", n_samples=2, n_features=3,
    ...                labels=(-1, 1), checksum=("sha256", hashlib.sha256(text).hexdigest()))
    >>> catalog = Catalog("https://example.org/libsvm/", {"tiny": tiny}, "an example")
    >>> home = tempfile.TemporaryDirectory()
    >>> file = dataset_path("tiny", data_home=home.name, catalog=catalog)
    >>> file.parent.mkdir()
    >>> _ = file.write_bytes(text)  # as if downloaded: nothing is fetched
    >>> download("tiny", data_home=home.name, catalog=catalog, progress=False) == file
    True
    >>> home.cleanup()
    """
    cat, dataset, home = resolve(name, catalog, data_home)
    fetch_file(cat, dataset, home, mirror, force, progress)
    return download_path(home, dataset)


def verify(name, *, data_home=None, progress=True, catalog=None):
    r"""Check the downloaded file of a catalogue dataset.

    The file is checked against its checksum, published in the catalogue or recorded at
    its first download; with neither, by parsing it as :func:`download` does, and then
    its sha256 is recorded (with a warning).

    Parameters
    ----------
    name : str
        The name of a dataset in the catalogue, such as ``"a9a"``.
    data_home : str or path-like, optional
        The data home (see :func:`data_home`); None (the default) means
        ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    progress : bool, default True
        Show a progress bar on a terminal (none where stderr is not one).
    catalog : Catalog or str or path-like, optional
        The catalogue that describes ``name``: one read already (:func:`read_catalog`), the
        path of a TOML file, or None (the default) for the one shipped with sparcml.

    Returns
    -------
    str
        The file's digest, as ``"algorithm:hex"``.

    Raises
    ------
    KeyError
        If the catalogue has no dataset ``name``.
    FileNotFoundError
        If the file is not downloaded.
    ChecksumError
        If the file does not have its published or recorded checksum.
    ContentError
        If a file without a known checksum does not parse as the catalogue describes it.

    Examples
    --------
    >>> import hashlib, tempfile
    >>> from sparcml_apps.datasets import Catalog, Dataset, dataset_path, verify
    >>> text = b"+1 1:0.5 3:1\n-1 2:2\n"
    >>> tiny = Dataset("tiny", "binary", "all", "tiny.svm", "none", n_samples=2, n_features=3,
    ...                labels=(-1, 1), checksum=("sha256", hashlib.sha256(text).hexdigest()))
    >>> catalog = Catalog("https://example.org/libsvm/", {"tiny": tiny}, "an example")
    >>> home = tempfile.TemporaryDirectory()
    >>> file = dataset_path("tiny", data_home=home.name, catalog=catalog)
    >>> file.parent.mkdir()
    >>> _ = file.write_bytes(text)  # as if downloaded: nothing is fetched
    >>> verify("tiny", data_home=home.name, catalog=catalog, progress=False)
    'sha256:7e63d3727a23a8e1b922ced4c27a1aa3cd1918922f9294db299fad4154220396'
    >>> _ = file.write_bytes(text.replace(b"2:2", b"2:3"))
    >>> from sparcml_apps.datasets import ChecksumError
    >>> try:
    ...     verify("tiny", data_home=home.name, catalog=catalog, progress=False)
    ... except ChecksumError as error:
    ...     print(error)
    /.../tiny.svm: sha256 mismatch: expected 7e63... (published in the catalogue an example),
    received ...; `sparcml-datasets download tiny --force` fetches it again
    >>> home.cleanup()
    """
    cat, dataset, home = resolve(name, catalog, data_home)
    return check_file(cat, dataset, home, downloaded_path(home, dataset), progress)


def forget(name, *, data_home=None, catalog=None):
    r"""Forget the sha256 recorded for the file of a dataset at its first download.

    The next download is then checked by parsing it, as the first was, and its sha256
    recorded anew (as when the site has changed the file). The downloaded file and the CSR
    cache stay.

    Parameters
    ----------
    name : str
        The name of a dataset in the catalogue, such as ``"a9a"``.
    data_home : str or path-like, optional
        The data home (see :func:`data_home`); None (the default) means
        ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    catalog : Catalog or str or path-like, optional
        The catalogue that describes ``name``: one read already (:func:`read_catalog`), the
        path of a TOML file, or None (the default) for the one shipped with sparcml.

    Returns
    -------
    dict or None
        The forgotten record, ``{"sha256": ..., "url": ...}``, or None if there was none.

    Raises
    ------
    KeyError
        If the catalogue has no dataset ``name``.
    DataHomeError
        If the record of checksums in the data home cannot be written.

    Examples
    --------
    A dataset without a published checksum has the sha256 of its file recorded when it is
    first verified:

    >>> import tempfile, warnings
    >>> from sparcml_apps.datasets import Catalog, Dataset, dataset_path, forget, verify
    >>> tiny = Dataset("tiny", "binary", "all", "tiny.svm", "none", n_samples=2, n_features=3,
    ...                labels=(-1, 1))
    >>> catalog = Catalog("https://example.org/libsvm/", {"tiny": tiny}, "an example")
    >>> home = tempfile.TemporaryDirectory()
    >>> file = dataset_path("tiny", data_home=home.name, catalog=catalog)
    >>> file.parent.mkdir()
    >>> _ = file.write_bytes(b"+1 1:0.5 3:1\n-1 2:2\n")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     verify("tiny", data_home=home.name, catalog=catalog, progress=False)
    'sha256:7e63...'
    >>> print(caught[0].message)
    tiny.svm has no published checksum: recorded sha256 7e63... it is checked from now on
    >>> forget("tiny", data_home=home.name, catalog=catalog)
    {'sha256': '7e63...', 'url': '.../tiny.svm'}
    >>> print(forget("tiny", data_home=home.name, catalog=catalog))
    None
    >>> home.cleanup()
    """
    _, dataset, home = resolve(name, catalog, data_home)
    return forget_record(home, dataset.file)


def convert(
    name, *, data_home=None, mirror=None, force=False, download=True, progress=True, catalog=None
):
    r"""Convert a catalogue dataset to its memory-mappable CSR cache, once.

    The file is downloaded first when missing (see :func:`download`). The bytes read are
    checked against the file's checksum, published or recorded (the cache's manifest
    records their digest); a file with neither must parse as :func:`download` requires,
    and then has its sha256 recorded. Columns are the catalogue's ``n_features``; labels
    must be among its ``labels``. A cache made from another file than the one the checksum
    names is made again. Safe to call from several processes at once: one converts, the
    others wait for it.

    A file that holds more rows or nonzeros than the catalogue lists is refused as soon as
    they are read (nothing past them is written), and a conversion does not start where
    the disk has no room for the cache the catalogue's figures make.

    Parameters
    ----------
    name : str
        The name of a dataset in the catalogue, such as ``"a9a"``.
    data_home : str or path-like, optional
        The data home (see :func:`data_home`); None (the default) means
        ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    mirror : str, optional
        An http:// or https:// URL that replaces the catalogue's ``base_url``: the file is
        fetched from ``mirror/<file>``. None (the default) means
        ``$SPARCML_DATASETS_MIRROR``, else the catalogue's ``base_url``.
    force : bool, default False
        Convert again even if the cache is there and current.
    download : bool, default True
        Download the file when it is missing; False raises FileNotFoundError instead.
    progress : bool, default True
        Show a progress bar on a terminal (none where stderr is not one).
    catalog : Catalog or str or path-like, optional
        The catalogue that describes ``name``: one read already (:func:`read_catalog`), the
        path of a TOML file, or None (the default) for the one shipped with sparcml.

    Returns
    -------
    pathlib.Path
        The cache directory, ``<data home>/csr/<name>``; :func:`load_cache` reads it.

    Raises
    ------
    KeyError
        If the catalogue has no dataset ``name``.
    FileNotFoundError
        If the file is not downloaded and ``download`` is False.
    ParseError
        If the text is malformed, holds an index past ``n_features`` or a label not in
        ``labels`` (it names the file and the line).
    ChecksumError
        If the bytes read do not have the file's published or recorded checksum.
    ContentError
        If the file is not the one the catalogue describes: another compression, or other
        counts of rows or nonzeros.
    DataHomeError
        If the data home cannot be written, or the disk has no room for the cache.
    DownloadError
        If the file must be downloaded and the transfer fails for good.

    See Also
    --------
    convert_svmlight : The same for a LIBSVM file given by its path.

    Examples
    --------
    >>> import hashlib, tempfile
    >>> from sparcml_apps.datasets import Catalog, Dataset, convert, dataset_path
    >>> text = b"+1 1:0.5 3:1\n-1 2:2\n"
    >>> tiny = Dataset("tiny", "binary", "all", "tiny.svm", "none", n_samples=2, n_features=3,
    ...                labels=(-1, 1), checksum=("sha256", hashlib.sha256(text).hexdigest()))
    >>> catalog = Catalog("https://example.org/libsvm/", {"tiny": tiny}, "an example")
    >>> home = tempfile.TemporaryDirectory()
    >>> file = dataset_path("tiny", data_home=home.name, catalog=catalog)
    >>> file.parent.mkdir()
    >>> _ = file.write_bytes(text)  # as if downloaded: nothing is fetched
    >>> cache = convert("tiny", data_home=home.name, catalog=catalog, progress=False)
    >>> cache.relative_to(home.name)
    PosixPath('csr/tiny')
    >>> sorted(path.name for path in cache.iterdir())
    ['data.npy', 'indices.npy', 'indptr.npy', 'labels.npy', 'manifest.json']
    >>> home.cleanup()
    """
    cat, dataset, home = resolve(name, catalog, data_home)
    dest = cache_path(home, dataset)
    if not force and is_current(cat, dataset, home, dest):
        return dest
    with write_lock(home, dest):
        if not force and is_current(cat, dataset, home, dest):
            return dest
        check_room(dataset, dest.parent)
        # a download without a checksum is checked by converting it: one parse, not two
        if download and not download_path(home, dataset).exists():
            if fetch_file(cat, dataset, home, mirror, False, progress, cache=dest):
                return dest
        convert_file(cat, dataset, home, downloaded_path(home, dataset), dest, progress)
    return dest


def load(name, *, data_home=None, download=True, mirror=None, progress=True, catalog=None):
    r"""Load a catalogue dataset as ``(X, y)``, memory-mapped from its CSR cache.

    The cache is made on first use (see :func:`convert`), and the file downloaded for it
    when missing (see :func:`download`); later calls read nothing in advance.

    Parameters
    ----------
    name : str
        The name of a dataset in the catalogue, such as ``"a9a"``.
    data_home : str or path-like, optional
        The data home (see :func:`data_home`); None (the default) means
        ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    download : bool, default True
        Download the file when it is missing; False raises FileNotFoundError instead.
    mirror : str, optional
        An http:// or https:// URL that replaces the catalogue's ``base_url``: the file is
        fetched from ``mirror/<file>``. None (the default) means
        ``$SPARCML_DATASETS_MIRROR``, else the catalogue's ``base_url``.
    progress : bool, default True
        Show a progress bar on a terminal (none where stderr is not one).
    catalog : Catalog or str or path-like, optional
        The catalogue that describes ``name``: one read already (:func:`read_catalog`), the
        path of a TOML file, or None (the default) for the one shipped with sparcml.

    Returns
    -------
    X : scipy.sparse.csr_matrix
        The rows, of the catalogue's ``n_features`` columns, float64 values.
    y : numpy.memmap
        The labels, float64.

    Raises
    ------
    KeyError
        If the catalogue has no dataset ``name``.
    FileNotFoundError
        If the file is not downloaded and ``download`` is False.
    ParseError, ChecksumError, ContentError, DataHomeError, DownloadError
        As :func:`convert` raises them.

    Examples
    --------
    >>> from sparcml_apps.datasets import load
    >>> X, y = load("a9a")  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (32561, 123)

    Offline, from a file already in its place:

    >>> import hashlib, tempfile
    >>> from sparcml_apps.datasets import Catalog, Dataset, dataset_path, load
    >>> text = b"+1 1:0.5 3:1\n-1 2:2\n"
    >>> tiny = Dataset("tiny", "binary", "all", "tiny.svm", "none", n_samples=2, n_features=3,
    ...                labels=(-1, 1), checksum=("sha256", hashlib.sha256(text).hexdigest()))
    >>> catalog = Catalog("https://example.org/libsvm/", {"tiny": tiny}, "an example")
    >>> home = tempfile.TemporaryDirectory()
    >>> file = dataset_path("tiny", data_home=home.name, catalog=catalog)
    >>> file.parent.mkdir()
    >>> _ = file.write_bytes(text)  # as if downloaded: nothing is fetched
    >>> X, y = load("tiny", data_home=home.name, catalog=catalog, progress=False)
    >>> X.toarray()
    array([[0.5, 0. , 1. ],
           [0. , 2. , 0. ]])
    >>> y
    memmap([ 1., -1.])
    >>> home.cleanup()
    """
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
    """The URL the file of a catalogue dataset is downloaded from.

    Parameters
    ----------
    name : str
        The name of a dataset in the catalogue, such as ``"a9a"``.
    mirror : str, optional
        An http:// or https:// URL that replaces the catalogue's ``base_url``: the file is
        fetched from ``mirror/<file>``. None (the default) means
        ``$SPARCML_DATASETS_MIRROR``, else the catalogue's ``base_url``.
    catalog : Catalog or str or path-like, optional
        The catalogue that describes ``name``: one read already (:func:`read_catalog`), the
        path of a TOML file, or None (the default) for the one shipped with sparcml.

    Returns
    -------
    str
        The base URL (with a ``/`` added where missing), then the file name, quoted.

    Raises
    ------
    KeyError
        If the catalogue has no dataset ``name``.
    ValueError
        If ``mirror`` (or the URL it falls back to) is not an http:// or https:// URL.

    Examples
    --------
    >>> from sparcml_apps.datasets import dataset_url
    >>> dataset_url("a9a", mirror="https://mirror.example.org/libsvm")
    'https://mirror.example.org/libsvm/a9a'
    >>> dataset_url("a9a", mirror="ftp://mirror.example.org/libsvm")
    Traceback (most recent call last):
    ...
    ValueError: mirror must be an http:// or https:// URL; got 'ftp://mirror.example.org/libsvm'
    """
    cat, dataset, _ = resolve(name, catalog, None)
    return source_url(cat, dataset, mirror)


def dataset_path(name, *, data_home=None, cache=False, catalog=None):
    """Where the downloaded file of a catalogue dataset, or its CSR cache, is kept.

    Whether or not it is there yet: nothing in the data home is read or written.

    Parameters
    ----------
    name : str
        The name of a dataset in the catalogue, such as ``"a9a"``.
    data_home : str or path-like, optional
        The data home (see :func:`data_home`); None (the default) means
        ``$SPARCML_DATA_HOME``, else ``~/sparcml_data``.
    cache : bool, default False
        Give the directory of the CSR cache (see :func:`convert`) instead of the file.
    catalog : Catalog or str or path-like, optional
        The catalogue that describes ``name``: one read already (:func:`read_catalog`), the
        path of a TOML file, or None (the default) for the one shipped with sparcml.

    Returns
    -------
    pathlib.Path
        ``<data home>/downloads/<file>``, or with ``cache`` ``<data home>/csr/<name>``.

    Raises
    ------
    KeyError
        If the catalogue has no dataset ``name``.

    Examples
    --------
    >>> from sparcml_apps.datasets import dataset_path
    >>> dataset_path("url", data_home="/srv/sparcml")
    PosixPath('/srv/sparcml/downloads/url_combined.bz2')
    >>> dataset_path("url", data_home="/srv/sparcml", cache=True)
    PosixPath('/srv/sparcml/csr/url')
    """
    _, dataset, home = resolve(name, catalog, data_home)
    return cache_path(home, dataset) if cache else download_path(home, dataset)
