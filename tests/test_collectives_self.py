"""The collectives on one rank (``MPI.COMM_SELF``), in the test process itself."""

import numpy as np
import pytest
from mpi4py import MPI

from collectives import ALGORITHMS, SparseVector, Stats, allreduce


@pytest.mark.parametrize("algorithm", [*ALGORITHMS, "auto"])
def test_one_rank_returns_its_own_vector(algorithm):
    vec = SparseVector([2, 5], np.array([1.5, -1.0], np.float32), 8)
    result = allreduce(vec, MPI.COMM_SELF, algorithm=algorithm, out="sparse")
    assert result.indices.tolist() == [2, 5] and result.values.tolist() == [1.5, -1.0]
    assert result.values.dtype == np.float32
    result.values[0] = 99  # the result is the caller's own copy
    assert vec.values[0] == 1.5


def test_dense_input_and_dense_output():
    dense = np.array([0.0, 2.0, 0.0, 3.0])
    for algorithm in ALGORITHMS:
        out = allreduce(dense, MPI.COMM_SELF, algorithm=algorithm, out="dense")
        np.testing.assert_array_equal(out, dense)


def test_stats_accumulate_over_calls():
    stats = Stats()
    vec = SparseVector([1], [1.0], 4)
    allreduce(vec, MPI.COMM_SELF, algorithm="dense", stats=stats)
    allreduce(vec, MPI.COMM_SELF, algorithm="ssar_split_allgather", stats=stats)
    assert stats.calls == 2 and stats.algorithm == "ssar_split_allgather"
    assert stats.seconds > 0 and stats.bytes_sent == 0  # one rank sends nothing


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"algorithm": "ring"}, ValueError, "algorithm must be one of"),
        ({"out": "csr"}, ValueError, "out must be one of"),
        ({"out": np.empty(3)}, ValueError, "out must be a 1-D array of the vector's size 4"),
        ({"out": np.empty(4, np.float32)}, ValueError, "and dtype float64, got shape"),
        ({"comm": "world"}, TypeError, "comm must be an mpi4py Intracomm, got str"),
    ],
)
def test_bad_arguments(kwargs, error, fragment):
    kwargs.setdefault("comm", MPI.COMM_SELF)
    with pytest.raises(error, match=fragment):
        allreduce(SparseVector([1], [1.0], 4), **kwargs)


def test_bad_vector():
    with pytest.raises(TypeError, match="vec must be a SparseVector or a 1-D ndarray, got list"):
        allreduce([1.0], MPI.COMM_SELF)
    with pytest.raises(TypeError, match="vec must be float32 or float64, got dtype int64"):
        allreduce(np.arange(3), MPI.COMM_SELF)
