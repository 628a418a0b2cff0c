"""The parts of the peers benchmark: the rows every system reads, the curves of growing
budgets, the memory measure, and systems that cannot run."""

import shutil
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file
from testdata import LIBSVM, needs_a9a

from sparcml_apps.bench import _peer_data, _peer_systems, peers
from sparcml_apps.datasets import make_url_like


def test_every_system_reads_the_same_rows(tmp_path):
    X, y = make_url_like(500, n_features=1000, random_state=1)
    files = _peer_data.write(tmp_path, "tiny", X[:400], y[:400], X[400:], y[400:], search_rows=100)
    assert (files.rows, files.test_rows, files.n_features) == (400, 100, 1000)
    for path, rows in (
        (files.train, slice(0, 400)),
        (files.test, slice(400, 500)),
        (files.search_train, slice(0, 80)),
        (files.search_valid, slice(80, 100)),
    ):
        X_read, y_read = load_svmlight_file(str(path), n_features=1000, zero_based=False)
        assert abs(X_read - X[rows]).max() < 1e-12 and np.array_equal(y_read, y[rows])
        with open(_peer_systems.vw(path)) as lines:
            for line, row, label in zip(lines, X[rows], y[rows], strict=True):
                head, _, features = line.partition(" |f")
                pairs = (item.split(":") for item in features.split())
                assert float(head) == label
                assert {int(i) - 1: float(v) for i, v in pairs} == pytest.approx(
                    dict(zip(row.indices.tolist(), row.data.tolist(), strict=True))
                )


def test_labels_become_signs_and_a_stratified_seeded_fifth_is_held_out(tmp_path):
    # a file sorted by label (as w8a's is): its last fifth would be one class
    path = tmp_path / "sorted.svm"
    labels = [0] * 700 + [1] * 300
    path.write_text("".join(f"{label} {i % 7 + 1}:{i + 1}\n" for i, label in enumerate(labels)))
    split = _peer_data.rows(str(path), generator_rows=0, max_rows=10**6, max_test_rows=10**6)
    name, X, y, X_test, y_test = split
    assert name == "sorted.svm" and X.shape == (800, 7) and X_test.shape == (200, 7)
    assert set(y) == set(y_test) == {-1.0, 1.0}
    assert np.sum(y_test == 1) == 60 and np.sum(y == 1) == 240  # each class's fifth
    # every row once, in one part or the other, the labels with it (the values are the
    # row numbers, one-based)
    numbers = np.concatenate([X.sum(axis=1).A.ravel(), X_test.sum(axis=1).A.ravel()])
    signs = np.concatenate([y, y_test])
    assert sorted(numbers.astype(int)) == list(range(1, 1001))
    assert np.array_equal(signs, np.where(numbers > 700, 1.0, -1.0))
    # seeded: the same split again; the training rows are shuffled, so the first rows
    # of a capped part hold both classes
    again = _peer_data.rows(str(path), generator_rows=0, max_rows=100, max_test_rows=10**6)
    assert np.array_equal(again[2], y[:100]) and 0 < np.sum(again[2] == 1) < 100
    assert _peer_data.split(str(path)) == "a stratified random fifth (seed 0)"
    assert _peer_data.split(f"{path},{path}") == "the dataset's test file"
    path.write_text("0 1:1\n1 2:1\n2 1:0.5\n0 3:1\n1 2:2\n")
    with pytest.raises(ValueError, match="sorted.svm.*two label values.*got 3"):
        _peer_data.rows(str(path), generator_rows=0, max_rows=100, max_test_rows=100)


@needs_a9a
def test_catalogue_datasets_in_the_data_home_are_found_with_their_test_split(tmp_path):
    (tmp_path / "downloads").mkdir()
    shutil.copy(LIBSVM / "a9a", tmp_path / "downloads" / "a9a")
    assert _peer_data.in_data_home(tmp_path) == ["a9a"]
    shutil.copy(LIBSVM / "a9a.t", tmp_path / "downloads" / "a9a.t")
    assert _peer_data.in_data_home(tmp_path) == ["a9a,a9a.t"]
    _peer_data.check("a9a,a9a.t", tmp_path)
    with pytest.raises(ValueError, match="^--datasets w8a: .*not in the data home"):
        _peer_data.check("w8a", tmp_path)
    with pytest.raises(ValueError, match="^--datasets no/such.svm: .*not a file"):
        _peer_data.check("no/such.svm", tmp_path)


class Counting(_peer_systems.System):
    """Fits take 10 ms an iteration (by the patched clock); accuracy grows with them."""

    name, budget = "counting", "iterations"

    def __init__(self, converges_at=None):
        self.converges_at = converges_at

    def default_budget(self):
        return 64

    def fit(self, data, setting):
        return setting["iterations"]

    def used(self, model):
        return min(model, self.converges_at or model)

    def accuracy(self, model, data):
        return model / 100


@pytest.mark.parametrize(
    ("system", "max_seconds", "max_points", "budgets", "capped", "converged"),
    [
        (Counting(), float("inf"), 100, [1, 2, 4, 8, 16, 32, 64], False, False),
        # 0.15 s after 8 iterations; 16 more would take it to 0.31 s
        (Counting(), 0.25, 100, [1, 2, 4, 8], True, False),
        (Counting(), float("inf"), 2, [1, 2], True, False),
        (Counting(converges_at=5), float("inf"), 100, [1, 2, 4, 8], False, True),
    ],
)
def test_a_curve_grows_the_budget_to_convergence_or_the_cap(
    monkeypatch, system, max_seconds, max_points, budgets, capped, converged
):
    monkeypatch.setattr(
        _peer_systems, "timed", lambda fit, *args: (0.01 * args[1]["iterations"], fit(*args))
    )
    curve = system.curve(None, {}, max_seconds=max_seconds, max_points=max_points)
    assert [p["budget"] for p in curve["points"]] == budgets
    assert [p["accuracy"] for p in curve["points"]] == [b / 100 for b in budgets]
    assert (curve["capped"], curve["converged"]) == (capped, converged)


def test_peak_memory_counts_the_whole_process_tree():
    grandchild = "import time; held = b'y' * 100_000_000; time.sleep(1.5)"
    child = (
        "import subprocess, sys; held = b'x' * 200_000_000; "
        f"subprocess.run([sys.executable, '-c', {grandchild!r}], check=True)"
    )
    returncode, _, stderr, peak = peers.measured([sys.executable, "-c", child], timeout=120)
    assert returncode == 0, stderr
    assert 300e6 < peak < 300e6 + 150e6  # two interpreters of their own: tens of MB


def test_a_system_past_its_time_is_ended():
    command = [sys.executable, "-c", "import subprocess, sys, time; time.sleep(60)"]
    with pytest.raises(subprocess.TimeoutExpired):
        peers.measured(command, timeout=1)


def test_a_missing_system_is_reported_not_run(monkeypatch, tmp_path):
    name = "Vowpal Wabbit"
    monkeypatch.setattr(peers.SYSTEMS[name], "missing", lambda: "vowpalwabbit is not installed")
    nowhere = tmp_path / "never-read.svm"
    files = _peer_data.Files("d", 3, 4, 1, nowhere, nowhere, nowhere, nowhere)
    record = peers.run_system(name, files, SimpleNamespace())
    assert record["missing"] == "vowpalwabbit is not installed"
    peers.summarize([record], 0.005)
    assert f"| {name} |  | missing: vowpalwabbit is not installed |" in peers.table([record])


def test_spark_without_java_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no Java runtime" in _peer_systems._java_missing()


def test_sparcml_with_n_jobs_trains_on_its_kept_pool_as_scikit_learn_does(tmp_path):
    X, y = make_url_like(3000, n_features=2000, random_state=2)
    files = _peer_data.write(
        tmp_path, "tiny", X[:2400], y[:2400], X[2400:], y[2400:], search_rows=500
    )
    scores = {}
    for system in (_peer_systems.SYSTEMS["sparcml, n_jobs=2"], _peer_systems.SGD()):
        system.start()
        try:
            data = system.load(files.train, files.test, files.n_features)
            model = system.fit(data, {system.budget: 20})
            scores[system.name] = system.accuracy(model, data)
            assert 1 <= system.used(model) <= 20
        finally:
            system.stop()
    from sparcml_apps import jobs

    assert jobs.pool(2).pids == {}  # stop() ended the workers
    ours, theirs = scores["sparcml, n_jobs=2"], scores["scikit-learn SGDClassifier"]
    assert ours >= theirs - 0.02, scores
