"""The errors of the dataset tools; each subclasses a builtin."""


class ParseError(ValueError):
    """Malformed LIBSVM text or unreadable compressed data, at a file and line."""

    def __init__(self, source, line, message):
        super().__init__(f"{source}, line {line}: {message}")
        self.source = source
        self.line = line
        self.reason = message


class DownloadError(OSError):
    """A transfer failed for good: an HTTP error, or retries used up."""


class ChecksumError(ValueError):
    """A file's digest is not the one expected; ``origin`` says where the expected one
    comes from (and how to change it), ``note`` what else is known of the file."""

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
    """A file is not the one the catalogue describes: another compression, text that does
    not parse, or other counts of rows or nonzeros."""


class DataHomeError(OSError):
    """The data home cannot be written where a download or a conversion must write."""
