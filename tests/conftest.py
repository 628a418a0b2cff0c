import numpy as np
import pytest


@pytest.fixture(scope="session")
def compiled_kernels():
    """Compile (or load from cache) the kernels once, before ranks race to do it."""
    from collectives._kernels import accumulate, merge_add, merge_runs

    for dtype in (np.float32, np.float64):
        for index in (np.uint32, np.uint64):
            i = np.arange(3, dtype=index)
            v = np.ones(3, dtype)
            merge_add(i, v, i, v)
            merge_runs(i, v, np.array([0, 1, 3], np.int64))
            accumulate(i, v, 0, np.zeros(3, dtype))
