"""The ``n_jobs`` pools, to start one ahead of its fits or end them all: the controls of
:mod:`sparcml_apps.backends.pool`, where the pools live (and their limits,
:mod:`sparcml_apps.backends.pool.limits`)."""

from .backends.pool import Pool, close, pool, row_blocks, workers

__all__ = ["Pool", "close", "pool", "row_blocks", "workers"]
