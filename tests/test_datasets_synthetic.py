"""make_url_like: reproducible, shaped like url, and learnable but not perfectly."""

import numpy as np
import pytest
from sklearn.linear_model import SGDClassifier

from sparcml_apps.datasets import GENERATORS, make_url_like


@pytest.fixture(scope="module")
def url_like():
    return make_url_like(300_000, random_state=0)


def test_same_seed_same_bits_other_seed_other_data():
    X, y = make_url_like(2000, random_state=42)
    X2, y2 = make_url_like(2000, random_state=np.random.default_rng(42))
    for a, b in ((X.indptr, X2.indptr), (X.indices, X2.indices), (X.data, X2.data), (y, y2)):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    X3, _ = make_url_like(2000, random_state=43)
    assert X3.nnz != X.nnz or not np.array_equal(X3.indices, X.indices)


def test_shape_and_layout(url_like):
    X, y = url_like
    assert X.shape == (300_000, 3_231_961) and y.shape == (300_000,)
    assert X.dtype == np.float64 and X.indices.dtype == X.indptr.dtype == np.int32
    assert X.has_canonical_format  # sorted, distinct columns in every row
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert 0.30 < np.mean(y == 1) < 0.37  # about a third positive, like url


def test_rows_vary_around_nnz_per_row(url_like):
    X, _ = url_like
    per_row = np.diff(X.indptr)
    assert 110 < per_row.mean() < 122
    assert per_row.std() > 0.3 * per_row.mean() and per_row.min() >= 1


def test_column_popularity_follows_a_power_law(url_like):
    X, _ = url_like
    rows_with = np.bincount(X.indices, minlength=X.shape[1]) / X.shape[0]
    assert rows_with[:3].min() > 0.95  # a few columns in nearly every row
    used = rows_with[rows_with > 0] * X.shape[0]
    assert used.size > 1_000_000 and np.median(used) <= 3  # millions of rare columns
    # rows-with-column falls with rank as a power law: log-log slope near -1.1 in the tail
    ranks = np.arange(1000, 100_000)
    slope = np.polyfit(np.log(ranks + 1), np.log(rows_with[ranks]), 1)[0]
    assert -1.3 < slope < -0.9


def test_values_mostly_binary(url_like):
    X, _ = url_like
    assert np.mean(X.data == 1.0) > 0.6
    assert X.data.min() > 0 and X.data.max() <= 1
    real = X.data[X.data != 1.0]
    assert np.array_equal(np.round(real * 10000) / 10000, real)  # k / 10000, written exactly


def test_linear_model_learns_well_but_not_perfectly(url_like):
    X, y = url_like
    train, test = slice(0, 240_000), slice(240_000, None)
    model = SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=0)
    model.fit(X[train], y[train])
    accuracy = model.score(X[test], y[test])
    assert 0.85 <= accuracy <= 0.95
    assert accuracy > max(np.mean(y[test] == 1), np.mean(y[test] == -1)) + 0.15


def test_options_and_arguments():
    X, y = make_url_like(500, n_features=10, nnz_per_row=116, random_state=0, dtype=np.float32)
    assert X.dtype == np.float32 and X.shape == (500, 10)
    assert np.diff(X.indptr).max() <= 5 and X.has_canonical_format
    for bad in ({"n_samples": 0}, {"n_features": -1}, {"nnz_per_row": 1.5}):
        arguments = {"n_samples": 10} | bad
        name = next(iter(bad))
        with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
            make_url_like(**arguments)


def test_dense_model_steeper_power_law_and_noise():
    X, y = make_url_like(60_000, n_features=200_000, random_state=1, **GENERATORS["url-like-dense"])
    X0, y0 = make_url_like(60_000, n_features=200_000, random_state=1)
    # a steeper power law concentrates the rows on fewer columns
    assert np.unique(X.indices).size < 0.5 * np.unique(X0.indices).size
    rows_with = np.bincount(X.indices, minlength=X.shape[1]) / X.shape[0]
    ranks = np.arange(100, 2000)
    slope = np.polyfit(np.log(ranks + 1), np.log(rows_with[ranks]), 1)[0]
    assert -2.0 < slope < -1.6
    # labels: a third positive; 20% flipped, so even the planted model errs about that often
    assert 0.30 < np.mean(y == 1) < 0.42
    train, test = slice(0, 50_000), slice(50_000, None)
    model = SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=0)
    accuracy = model.fit(X[train], y[train]).score(X[test], y[test])
    assert 0.6 < accuracy < 0.8


def test_flat_power_law_dense_model_and_noise():
    X, y = make_url_like(60_000, random_state=1, **GENERATORS["url-like-flat"])
    assert X.shape[1] == 200_000 and 55 < X.nnz / X.shape[0] < 65
    # a flatter power law than url's: nearly every column is in some row
    assert np.unique(X.indices).size > 0.98 * X.shape[1]
    rows_with = np.bincount(X.indices, minlength=X.shape[1]) / X.shape[0]
    ranks = np.arange(100, 20_000)
    slope = np.polyfit(np.log(ranks + 1), np.log(rows_with[ranks]), 1)[0]
    assert -0.9 < slope < -0.7
    assert 0.30 < np.mean(y == 1) < 0.42
    train, test = slice(0, 50_000), slice(50_000, None)
    model = SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=0)
    accuracy = model.fit(X[train], y[train]).score(X[test], y[test])
    assert 0.6 < accuracy < 0.75


def test_dense_model_weighs_rare_columns():
    # the same rows, labelled by the sparse and by the dense model, differ in many labels
    _, sparse = make_url_like(5000, n_features=50_000, random_state=3, label_noise=0.0)
    _, dense = make_url_like(
        5000, n_features=50_000, random_state=3, planted="dense", label_noise=0.0
    )
    assert 0.2 < np.mean(sparse != dense) < 0.6


def test_generator_options_refused():
    for bad, message in (
        ({"planted": "none"}, "planted must be one of"),
        ({"power_law": 1}, "power_law must be a positive number"),
        ({"power_law": -2.0}, "power_law must be a positive number"),
        ({"label_noise": 0.7}, "label_noise must be a probability"),
    ):
        with pytest.raises(ValueError, match=message):
            make_url_like(10, **bad)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_written_file_reads_back_as_the_matrix_bit_for_bit(tmp_path, name, monkeypatch):
    from sparcml_apps.datasets import _url_like_file, load_svmlight, write_url_like

    monkeypatch.setattr(_url_like_file, "BLOCK_ROWS", 1000)  # many blocks, a partial last one
    options = {**GENERATORS[name], "n_features": 40_000, "nnz_per_row": 30, "random_state": 7}
    X, y = make_url_like(5500, **options)
    seen = []
    written = write_url_like(
        tmp_path / "train.svm", 5500, test_path=tmp_path / "test.svm", test_rows=1200,
        progress=lambda *args: seen.append(args), **options,
    )  # fmt: skip
    assert written == [tmp_path / "train.svm", tmp_path / "test.svm"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.svm", "train.svm"]
    for path, rows in zip(written, (slice(0, 4300), slice(4300, None)), strict=True):
        A, a = load_svmlight(path, 40_000)
        B = X[rows]
        for got, want in ((A.indptr, B.indptr), (A.indices, B.indices), (A.data, B.data)):
            assert np.array_equal(got, want)
        assert np.array_equal(a, y[rows])
    assert [done for done, _, _ in seen] == [1000 * k for k in range(1, 5)] + [4300] + [5300, 5500]
    assert {total for _, total, _ in seen} == {5500}


def test_written_file_is_whole_or_absent(tmp_path):
    from sparcml_apps.datasets import write_url_like

    def interrupt(done, total, seconds):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_url_like(tmp_path / "x.svm", 100_000, 10_000, 10, random_state=0, progress=interrupt)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match=r"test_rows must be an integer in \[0, n_samples\)"):
        write_url_like(tmp_path / "x.svm", 100, test_path=tmp_path / "t.svm", test_rows=100)
    with pytest.raises(ValueError, match="test_rows=10 needs a test_path"):
        write_url_like(tmp_path / "x.svm", 100, test_rows=10)
    with pytest.raises(ValueError, match="n_samples must be a positive integer"):
        write_url_like(tmp_path / "x.svm", 0)
    assert list(tmp_path.iterdir()) == []
