class RankError(RuntimeError):
    """Another rank of the communicator failed; ``rank`` and its ``message`` say how."""

    def __init__(self, rank, message):
        super().__init__(f"rank {rank} failed: {message}")
        self.rank = rank
        self.message = message
