import pytest

from collectives import ALGORITHMS, cost_model


def test_expected_union_matches_counting():
    # two halves of 10 entries drawn at random: 10 * (1 - 0.5**2) expected
    assert cost_model.expected_union(10, 5, 2) == pytest.approx(7.5)
    assert cost_model.expected_union(10, 20, 3) == 10
    assert cost_model.expected_union(0, 0, 3) == 0


def test_dense_bytes_are_those_of_a_bandwidth_optimal_allreduce():
    p = cost_model.predict("dense", 4, 2**20, 0, value_itemsize=4)
    header = 2 * 3 * 64 / 4
    assert p.bytes_sent == pytest.approx(2 * 3 / 4 * 4 * 2**20 + header)


def test_split_allgather_bytes_count_both_phases():
    n, k, procs = 2**20, 1000, 4
    union = cost_model.expected_union(n, k, procs) / procs
    p = cost_model.predict("ssar_split_allgather", procs, n, k)
    expected = 2 * 3 * 64 / 4 + 3 * (8 * k / 4 + 8 + 16 + 8 * union)
    assert p.bytes_sent == pytest.approx(expected)


def test_one_rank_sends_nothing():
    for name in ALGORITHMS:
        assert cost_model.predict(name, 1, 1000, 10).bytes_sent == 0


@pytest.mark.parametrize(
    ("nnz", "expected"),
    [(10, "ssar_recursive_double"), (2**20, "dense")],
)
def test_choose_follows_the_costs(nnz, expected):
    assert cost_model.choose(8, 2**20, nnz) == expected


def test_choose_prefers_split_for_many_nonzeros():
    assert cost_model.choose(8, 2**24, 2**16) in ("ssar_split_allgather", "dsar_split_allgather")


def test_unknown_algorithm():
    with pytest.raises(ValueError, match="unknown algorithm 'ring'"):
        cost_model.predict("ring", 2, 10, 1)
