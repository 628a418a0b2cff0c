class RankError(RuntimeError):
    """Another rank of the communicator failed; ``rank`` and its ``message`` say how.

    Raised by a collective (or :func:`collectives.check`) on every rank but the one that
    failed, which raises its own error instead: no rank goes on alone into a collective
    that the failed rank never enters.

    Parameters
    ----------
    rank : int
        The rank that failed, in the communicator of the call.
    message : str
        Its error, as ``"TypeName: text"`` (at most 4096 bytes of UTF-8).

    Attributes
    ----------
    rank : int
        The rank that failed.
    message : str
        Its error.

    See Also
    --------
    check : Raise on every rank if any rank passes an error.

    Examples
    --------
    >>> from collectives import RankError
    >>> error = RankError(2, "ValueError: vec must be 1-D, got shape (2, 3)")
    >>> str(error)
    'rank 2 failed: ValueError: vec must be 1-D, got shape (2, 3)'
    >>> error.rank
    2
    """

    def __init__(self, rank, message):
        super().__init__(f"rank {rank} failed: {message}")
        self.rank = rank
        self.message = message
