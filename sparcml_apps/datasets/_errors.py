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
    """A file's digest is not the one expected."""

    def __init__(self, source, algorithm, expected, received):
        super().__init__(
            f"{source}: {algorithm} mismatch: expected {expected}, received {received}"
        )
        self.expected = expected
        self.received = received
