import pytest

from collectives import ALGORITHMS, cost_model, thresholds


def test_expected_union_matches_counting():
    # two halves of 10 entries drawn at random: 10 * (1 - 0.5**2) expected
    assert cost_model.expected_union(10, 5, 2) == pytest.approx(7.5)
    assert cost_model.expected_union(10, 20, 3) == 10
    assert cost_model.expected_union(0, 0, 3) == 0


def test_dense_bytes_are_those_of_a_bandwidth_optimal_allreduce():
    p = cost_model.predict("dense", 4, 2**20, 0, value_itemsize=4)
    header = 2 * 3 * 80 / 4
    assert p.bytes_sent == pytest.approx(2 * 3 / 4 * 4 * 2**20 + header)


def test_split_allgather_bytes_count_both_phases():
    n, k, procs = 2**20, 1000, 4
    union = cost_model.expected_union(n, k, procs) / procs
    p = cost_model.predict("ssar_split_allgather", procs, n, k)
    expected = 2 * 3 * 80 / 4 + 3 * (8 * k / 4 + 8 + 16 + 8 * union)
    assert p.bytes_sent == pytest.approx(expected)


@pytest.mark.parametrize("bitmap", ["auto", "list"])
def test_split_allgather_bytes_count_bitmaps_where_bytes_are_dear(bitmap, monkeypatch):
    # a rank holds 12.5% of 2**20: its slice of each range and each reduced range have
    # more indices than a bitmap of the range has words (2**18 / 32)
    monkeypatch.setattr(thresholds, "BITMAP", bitmap)
    n, k, procs, words = 2**20, 2**17, 4, 2**18 // 32
    share = cost_model.expected_union(n, k, procs) / procs
    p = cost_model.predict("ssar_split_allgather", procs, n, k, beta=6e-9)
    if bitmap == "auto":
        expected = 2 * 3 * 80 / 4 + 3 * (4 * k / 4 + 4 * words + 8 + 16 + 4 * share + 4 * words)
    else:
        expected = 2 * 3 * 80 / 4 + 3 * (8 * k / 4 + 8 + 16 + 8 * share)
    assert p.bytes_sent == pytest.approx(expected)
    # where a byte costs less than decoding an entry, the lists travel
    cheap = cost_model.predict("ssar_split_allgather", procs, n, k, beta=1e-10)
    assert cheap.bytes_sent == pytest.approx(2 * 3 * 80 / 4 + 3 * (8 * k / 4 + 8 + 16 + 8 * share))


def test_an_unknown_bitmap_setting_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(thresholds, "BITMAP", "always")
    with pytest.raises(
        ValueError, match="thresholds.BITMAP must be 'auto', 'list' or 'bitmap', got 'always'"
    ):
        cost_model.predict("ssar_split_allgather", 4, 2**20, 2**17)


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


def test_store_keeps_one_record_per_number_of_ranks(tmp_path, monkeypatch):
    path = tmp_path / "nested" / "calibration.json"
    monkeypatch.setenv(cost_model.CALIBRATION_ENV, str(path))
    assert cost_model.calibration_path() == path
    assert cost_model.stored(4) is None
    constants = {"alpha": 1e-5, "beta": 1e-9, "gamma": 2e-9, "dense_gamma": 3e-10}
    assert cost_model.store(constants, 4) == path
    cost_model.store({**constants, "alpha": 7e-5}, 2)
    assert cost_model.stored(4) == constants
    assert cost_model.stored(2)["alpha"] == 7e-5
    assert cost_model.stored(3) is None


def test_default_path_is_in_the_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(cost_model.CALIBRATION_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cost_model.calibration_path() == tmp_path / "sparcml" / "calibration.json"


def test_unreadable_calibration_names_the_file(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=f"calibration file {path} is not readable JSON"):
        cost_model.stored(2, path)


def test_choose_quickly_follows_calibrated_constants():
    n, k = 2**20, 2**14
    default = cost_model.choose_quickly(4, n, k)
    assert default == cost_model.choose(4, n, k)
    # messages nearly free and bytes dear: the algorithm that sends the fewest bytes
    calibrated = (1e-12, 1.0, float("nan"), None)
    fewest = min(
        ALGORITHMS, key=lambda name: cost_model.predict(name, 4, n, k, beta=1.0).bytes_sent
    )
    assert cost_model.choose_quickly(4, n, k, calibrated=calibrated) == fewest
    dear_merges = (1e-12, 1e-15, 1.0, 1e-15)  # dense merges nothing
    assert cost_model.choose_quickly(4, n, k, calibrated=dear_merges) == "dense"


def test_a_bad_stored_constant_names_itself(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text('{"2": {"alpha": "fast", "beta": 1e-9}}')
    with pytest.raises(ValueError, match="alpha for 2 ranks must be a non-negative number"):
        cost_model.stored(2, path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "expected a JSON object of records by number of ranks, got list"),
        ('{"4": 3}', "the record for 4 ranks must be a JSON object of constants, got int"),
        ('{"4": {"alpha": -1}}', "alpha for 4 ranks must be a non-negative number"),
        ("{", "is not readable JSON"),
    ],
)
def test_a_calibration_file_of_another_shape_is_refused(tmp_path, text, message):
    path = tmp_path / "calibration.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        cost_model.stored(4, path)


def test_collectives_warn_and_take_the_defaults_where_the_calibration_is_bad(tmp_path, monkeypatch):
    # rank 0 reads the file while the others wait for what it found: whatever the file
    # holds, rank 0 must not raise there
    import numpy as np
    from mpi4py import MPI

    from collectives import allreduce

    path = tmp_path / "calibration.json"
    path.write_text('{"1": 3}')
    monkeypatch.setenv(cost_model.CALIBRATION_ENV, str(path))
    comm = MPI.COMM_SELF.Dup()  # a communicator the collectives have not read a file for
    try:
        with pytest.warns(UserWarning, match="must be a JSON object.*default constants"):
            total = allreduce(np.array([1.0, 0.0, 2.0]), comm)
    finally:
        comm.Free()
    assert total.to_dense().tolist() == [1.0, 0.0, 2.0]
