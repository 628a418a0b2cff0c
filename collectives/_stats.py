from dataclasses import dataclass


@dataclass
class Stats:
    """Traffic and time of collective calls; pass one as ``stats=`` and it accumulates.

    ``bytes_sent`` and ``bytes_received`` count the payload this rank hands to or takes from
    other ranks: a point-to-point message's size; for ``Alltoallv`` the blocks addressed to
    other ranks; for ``Allgatherv`` the rank's own block once per other rank (sent) and the
    other ranks' blocks (received); for ``Allreduce`` of ``n`` bytes the ``2 (P - 1) n / P``
    that a bandwidth-optimal allreduce moves. ``messages`` counts the messages this rank sends
    in those same models. ``algorithm`` is the algorithm of the latest call.

    Parameters
    ----------
    algorithm : str or None, default None
        The algorithm of the latest call: a name of :data:`collectives.ALGORITHMS` (the one
        ``"auto"`` chose), or ``"allgather"``.
    calls : int, default 0
        The number of calls counted.
    bytes_sent : int, default 0
        The payload bytes this rank sent to other ranks.
    bytes_received : int, default 0
        The payload bytes this rank received from other ranks.
    messages : int, default 0
        The messages this rank sent.
    seconds : float, default 0.0
        The wall-clock time of the calls, each from its start until its result is ready
        (for :func:`collectives.iallreduce`: until the call completes, not until ``wait()``).

    See Also
    --------
    allreduce, allgather, iallreduce : The calls that take ``stats=``.

    Examples
    --------
    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> from collectives import SparseVector, Stats, allreduce
    >>> stats = Stats()
    >>> vec = SparseVector([1, 4], np.array([0.5, -2.0], np.float32), 6)
    >>> for _ in range(3):
    ...     _ = allreduce(vec, MPI.COMM_SELF, algorithm="ssar_split_allgather", stats=stats)
    >>> stats.algorithm, stats.calls
    ('ssar_split_allgather', 3)
    >>> stats.bytes_sent, stats.bytes_received, stats.messages  # one rank sends nothing
    (0, 0, 0)
    """

    algorithm: str | None = None
    calls: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    messages: int = 0
    seconds: float = 0.0

    def add(self, other):
        """Accumulate ``other`` into this record.

        Parameters
        ----------
        other : Stats
            The record to add: its counts and seconds are added to these, and its
            ``algorithm``, where it has one, replaces this one's.

        Returns
        -------
        Stats
            This record, updated.

        Examples
        --------
        >>> from collectives import Stats
        >>> total = Stats(algorithm="dense", calls=1, bytes_sent=96, messages=2)
        >>> total = total.add(Stats(algorithm="ssar_recursive_double", calls=1, bytes_sent=40))
        >>> total.algorithm, total.calls, total.bytes_sent, total.messages
        ('ssar_recursive_double', 2, 136, 2)
        """
        if other.algorithm is not None:
            self.algorithm = other.algorithm
        self.calls += other.calls
        self.bytes_sent += other.bytes_sent
        self.bytes_received += other.bytes_received
        self.messages += other.messages
        self.seconds += other.seconds
        return self

    def as_dict(self):
        """The record as a dict of its fields.

        Returns
        -------
        dict
            ``algorithm``, ``calls``, ``bytes_sent``, ``bytes_received``, ``messages`` and
            ``seconds``, in that order.

        Examples
        --------
        >>> from collectives import Stats
        >>> record = Stats(algorithm="dense", calls=1).as_dict()
        >>> list(record)
        ['algorithm', 'calls', 'bytes_sent', 'bytes_received', 'messages', 'seconds']
        >>> record["algorithm"], record["calls"]
        ('dense', 1)
        """
        return dict(vars(self))
