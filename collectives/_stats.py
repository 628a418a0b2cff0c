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
    """

    algorithm: str | None = None
    calls: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    messages: int = 0
    seconds: float = 0.0

    def add(self, other):
        """Accumulate ``other`` into this record."""
        self.algorithm = other.algorithm
        self.calls += other.calls
        self.bytes_sent += other.bytes_sent
        self.bytes_received += other.bytes_received
        self.messages += other.messages
        self.seconds += other.seconds
        return self

    def as_dict(self):
        return dict(vars(self))
