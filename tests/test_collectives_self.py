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


def test_a_wait_spins_then_yields_then_naps_longer(monkeypatch):
    # a wait on a crowded node, on a clock of its own: each test of the request takes 10 us
    from collectives import _wire, thresholds

    now, actions = [0.0], []

    class Clock:
        @staticmethod
        def perf_counter():
            return now[0]

        @staticmethod
        def sleep(seconds):
            actions.append(("nap", now[0], seconds))
            now[0] += seconds

    class System:
        @staticmethod
        def sched_yield():
            actions.append(("yield", now[0], 0.0))

    def done(pending, comm):
        now[0] += 10e-6
        return now[0] >= 0.2

    monkeypatch.setattr(_wire, "time", Clock)
    monkeypatch.setattr(_wire, "os", System)
    monkeypatch.setattr(_wire, "_done", done)
    monkeypatch.setattr(thresholds, "YIELD_SECONDS", 0.05)

    def steps():
        yield MPI.REQUEST_NULL
        return "over"

    assert _wire.run(steps(), MPI.COMM_SELF, nap=True) == "over"
    yields = [at for kind, at, _ in actions if kind == "yield"]
    naps = [(at, seconds) for kind, at, seconds in actions if kind == "nap"]
    assert yields and naps and now[0] >= 0.2
    # the first tests spin, then it yields between tests until the wait has lasted
    # YIELD_SECONDS, then it naps: NAP_SECONDS, each twice the last, up to the longest
    assert thresholds.SPIN_SECONDS <= yields[0] <= thresholds.SPIN_SECONDS + 20e-6
    assert max(yields) <= thresholds.YIELD_SECONDS + 10e-6 < naps[0][0]
    assert [seconds for _, seconds in naps[:3]] == [thresholds.NAP_SECONDS * 2**i for i in range(3)]
    assert max(seconds for _, seconds in naps) == thresholds.LONGEST_NAP_SECONDS
    # without naps, the wait is MPI's own (a null request's returns at once)
    actions.clear()
    assert _wire.run(steps(), MPI.COMM_SELF, nap=False) == "over"
    assert actions == []


def test_stats_add_keeps_the_algorithm_of_an_empty_record():
    total = Stats(algorithm="dense", calls=1, bytes_sent=8)
    total.add(Stats())
    assert (total.algorithm, total.calls, total.bytes_sent) == ("dense", 1, 8)
    total.add(Stats(algorithm="ssar_split_allgather", calls=1))
    assert (total.algorithm, total.calls) == ("ssar_split_allgather", 2)


def test_allgather_names_its_argument_when_a_dense_vector_is_bad():
    import numpy as np
    from mpi4py import MPI

    from collectives import allgather

    with pytest.raises((TypeError, ValueError), match=r"^vec "):
        allgather(np.zeros((2, 2)), MPI.COMM_SELF)
