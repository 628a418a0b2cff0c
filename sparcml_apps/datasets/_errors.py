"""The errors of the dataset tools; each subclasses a builtin."""


class ParseError(ValueError):
    r"""Malformed LIBSVM text or unreadable compressed data, at a file and line.

    Raised by the parsers (:func:`load_svmlight`, :func:`convert_svmlight`, :func:`shard`,
    and :func:`convert` or :func:`load` of a catalogue dataset) for a line that is not
    ``label index:value ...`` with numbers, 1-based indices and values, an index past
    ``n_features``, a label outside the catalogue's ``labels``, or compressed data that
    cannot be read. A ValueError: ``except ValueError`` catches it too.

    Parameters
    ----------
    source : str or path-like
        The file (or ``file:member`` of an archive) the error is in.
    line : int
        The number of the line in it, from 1.
    message : str
        What is wrong there.

    Attributes
    ----------
    source : str or path-like
        The file.
    line : int
        The line number, from 1.
    reason : str
        What is wrong there (``message``).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sparcml_apps.datasets import ParseError, load_svmlight
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "bad.svm"
    >>> _ = path.write_text("+1 1:0.5 3:1\n-1 2:oops\n")
    >>> try:
    ...     load_svmlight(path)
    ... except ParseError as error:
    ...     print(error.line, error.reason)
    2 expected a number after the index, got '2:oops'
    >>> folder.cleanup()
    """

    def __init__(self, source, line, message):
        super().__init__(f"{source}, line {line}: {message}")
        self.source = source
        self.line = line
        self.reason = message


class DownloadError(OSError):
    """A transfer failed for good: an HTTP error, or retries used up.

    Raised by :func:`download` (and :func:`convert` or :func:`load` when they download)
    when the server answers with an HTTP error other than a passing one, offers or sends
    another size than the catalogue's, or the connection fails after every retry. Unless
    the size was wrong, what was received stays in a ``.part`` file beside the file's
    place, which the next call resumes. An OSError.
    """


class ChecksumError(ValueError):
    """A file's digest is not the one expected.

    Raised by :func:`download`, :func:`verify`, :func:`convert` and :func:`load` when a
    file (a new download, or one in the data home) does not have the checksum published
    in the catalogue, or recorded at its first download. A ValueError.

    Parameters
    ----------
    source : str or path-like
        The file or URL whose digest was computed.
    algorithm : str
        The digest's algorithm, ``"sha256"`` or ``"md5"``.
    expected : str
        The digest expected, in hexadecimal.
    received : str
        The digest of the file, in hexadecimal.
    origin : str, optional
        Where the expected digest comes from (and how to change it); default None.
    note : str, optional
        What else is known of the file, or what to do; default None.

    Attributes
    ----------
    expected : str
        The digest expected.
    received : str
        The digest of the file.

    Examples
    --------
    >>> from sparcml_apps.datasets import ChecksumError
    >>> error = ChecksumError("a9a", "md5", "0123", "4567", "published in the catalogue")
    >>> print(error)
    a9a: md5 mismatch: expected 0123 (published in the catalogue), received 4567
    >>> error.expected, error.received
    ('0123', '4567')
    """

    def __init__(self, source, algorithm, expected, received, origin=None, note=None):
        origin = f" ({origin})" if origin else ""
        note = f"; {note}" if note else ""
        super().__init__(
            f"{source}: {algorithm} mismatch: expected {expected}{origin}, received {received}"
            + note
        )
        self.expected = expected
        self.received = received


class ContentError(ValueError):
    """A file is not the one the catalogue describes.

    Raised by :func:`download`, :func:`verify`, :func:`convert` and :func:`load` when a
    file holds another compression than its record's, holds more rows or nonzeros than the
    record lists, or, without a published or recorded checksum, does not parse or holds
    other counts of rows or nonzeros. A ValueError.
    """


class DataHomeError(OSError):
    """The data home cannot be written where a download or a conversion must write.

    Raised by :func:`download`, :func:`convert`, :func:`load` and :func:`forget` when a
    folder or file of the data home cannot be made or written (read-only, or not
    permitted), or the disk has no room for a download or the CSR cache the catalogue's
    figures make. An OSError.
    """
