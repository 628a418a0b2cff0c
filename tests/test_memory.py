"""Out of core: when a rank's rows (memory maps) exceed its memory, epochs go a window of
blocks at a time; the order is still a seeded permutation, and reruns give the same model."""

import logging
import os

import numpy as np
import pytest

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.bench import cgroups
from sparcml_apps.datasets import convert_svmlight, load_cache, write_url_like
from sparcml_apps.training import memory


def test_epoch_order_is_a_permutation_of_shuffled_windows_of_blocks():
    n, block = 10_007, 100
    order, starts, blocks = memory.epoch_order(np.random.default_rng(5), n, block)
    assert np.array_equal(np.sort(order), np.arange(n))
    assert starts[0] == 0 and np.all(np.diff(starts) > 0)
    assert len(blocks) == -(-101 // memory.WINDOW_BLOCKS)
    firsts = np.concatenate(blocks)
    assert np.array_equal(np.sort(firsts), np.arange(0, n, block))  # every block once
    assert not np.array_equal(firsts, np.sort(firsts))  # in a new order
    ends = [*starts[1:], n]
    for start, end, window in zip(starts, ends, blocks, strict=True):
        rows = order[start:end]
        # a window holds its blocks' rows, each once, mixed across the blocks
        expected = np.concatenate([np.arange(b, min(b + block, n)) for b in window])
        assert np.array_equal(np.sort(rows), np.sort(expected))
        assert not np.array_equal(rows, expected)
        if len(window) > 1:
            assert len(np.unique(rows[:block] // block)) > 1
    # the same generator state, the same order; in memory, the plain permutation
    again = memory.epoch_order(np.random.default_rng(5), n, block)[0]
    assert np.array_equal(order, again)
    plain, starts, blocks = memory.epoch_order(np.random.default_rng(5), n, 0)
    assert np.array_equal(plain, np.random.default_rng(5).permutation(n)) and blocks is None


def test_file_backed_and_limit(tmp_path, monkeypatch):
    (X, _), _ = cache(tmp_path)
    assert memory.file_backed(X.data) and memory.file_backed(X.indices[10:])
    assert not memory.file_backed(X.data.copy())
    monkeypatch.setenv(memory.LIMIT_VARIABLE, "123456789")
    assert memory.limit() == 123456789
    monkeypatch.delenv(memory.LIMIT_VARIABLE)
    assert 0 < memory.limit() <= 2**63


def cache(tmp_path):
    """10,000 url-like rows to train and 2,000 to test, as CSR caches (memory maps)."""
    write_url_like(tmp_path / "train.svm", 12_000, 20_000, 40, random_state=3,
                   test_path=tmp_path / "test.svm", test_rows=2_000)  # fmt: skip
    for part in ("train", "test"):
        convert_svmlight(tmp_path / f"{part}.svm", tmp_path / part, n_features=20_000)
    return load_cache(tmp_path / "train"), load_cache(tmp_path / "test")


def test_out_of_core_fit_reruns_bit_for_bit_and_learns_as_well(tmp_path, monkeypatch, caplog):
    (X, y), (X_test, y_test) = cache(tmp_path)

    def fit():
        return SparseSGDClassifier(max_iter=4, tol=None, random_state=1).fit(X, y)

    with caplog.at_level(logging.INFO, logger="sparcml_apps.training.memory"):
        inside = fit()
    assert "trained in memory" in caplog.text
    caplog.clear()
    # room for 600 KB of rows: the 5.3 MB of rows go out of core (in windows of 200 KB)
    monkeypatch.setattr(memory, "LEAST_WINDOW", 0)
    room = 600e3
    limit = memory.SLACK + memory.MODELS * 8 * 20_000 + room
    monkeypatch.setenv(memory.LIMIT_VARIABLE, str(limit))
    held = memory.csr_bytes(X)
    expected_rows = int(room * memory.WINDOW_SHARE / memory.WINDOW_BLOCKS / (held / 10_000))
    with caplog.at_level(logging.INFO, logger="sparcml_apps.training.memory"):
        first = fit()
    assert f"trained out of core, windows of 8 blocks of {expected_rows} rows" in caplog.text
    second = fit()
    assert first.coef_.tobytes() == second.coef_.tobytes()
    assert first.intercept_.tobytes() == second.intercept_.tobytes()
    assert first.coef_.tobytes() != inside.coef_.tobytes()  # another order
    # reading ahead and letting go change what is in memory, not the model
    monkeypatch.setattr(memory.Windows, "_advise", lambda self, k, what: None)
    assert fit().coef_.tobytes() == first.coef_.tobytes()
    assert first.score(X_test, y_test) == pytest.approx(inside.score(X_test, y_test), abs=0.01)


def test_progress_within_epochs_leaves_the_model_alone():
    from sparcml_apps.datasets import make_url_like

    X, y = make_url_like(40_000, 20_000, 30, random_state=2)

    class Steps:
        def __init__(self):
            self.calls = []

        def __call__(self, estimator, record):
            self.calls.append("epoch")

        def steps(self, done, rows):
            self.calls.append((done, rows))

    seen = Steps()
    told = SparseSGDClassifier(max_iter=2, tol=None, random_state=0, callback=seen).fit(X, y)
    plain = SparseSGDClassifier(max_iter=2, tol=None, random_state=0).fit(X, y)
    assert told.coef_.tobytes() == plain.coef_.tobytes()
    epoch = [(0, 40_000), (16_384, 40_000), (32_768, 40_000), (40_000, 40_000), "epoch"]
    assert seen.calls == epoch * 2


@pytest.mark.bench  # about 2 minutes: 1.6 GB of rows written, converted and trained
@pytest.mark.skipif(not cgroups.available(), reason=cgroups.WHY_NOT)
def test_out_of_core_in_a_cgroup_of_half_the_rows(tmp_path):
    import json
    import subprocess
    import sys

    write_url_like(tmp_path / "train.svm", 1_200_000, random_state=4,
                   test_path=tmp_path / "test.svm", test_rows=100_000)  # fmt: skip
    for part in ("train", "test"):
        convert_svmlight(tmp_path / f"{part}.svm", tmp_path / part, n_features=3_231_961)
        (tmp_path / f"{part}.svm").unlink()
    X, y = load_cache(tmp_path / "train")
    limit = memory.csr_bytes(X) // 2
    runs = {}
    for name in ("memory", "limited"):
        command = [
            sys.executable, "-m", "sparcml_apps.cli.main", "train", "--dataset",
            tmp_path / "train", "--test", tmp_path / "test", "--n-features", 3_231_961,
            "--epochs", 2, "--metrics", tmp_path / f"{name}.json",
            "--model", tmp_path / f"{name}.joblib",
        ]  # fmt: skip
        command = list(map(str, command))
        if name == "memory":
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        else:
            for part in ("train", "test"):
                cgroups.evict(tmp_path / part)
            with cgroups.limited(limit) as group:
                done = subprocess.run(
                    command, capture_output=True, text=True, timeout=600, preexec_fn=group.join
                )
        assert done.returncode == 0, done.stdout + done.stderr
        assert ("trained out of core" in done.stderr) == (name == "limited"), done.stderr
        runs[name] = json.loads((tmp_path / f"{name}.json").read_text())
    memory_accuracy = runs["memory"]["test_accuracy"]
    assert runs["limited"]["test_accuracy"] == pytest.approx(memory_accuracy, abs=0.003)
    assert runs["memory"]["peak_rss_bytes"][0] > limit  # in memory it needs more than that


@pytest.mark.skipif(not cgroups.available(), reason=cgroups.WHY_NOT)
def test_a_memory_cgroup_holds_its_processes_to_its_limit(tmp_path):
    import subprocess
    import sys

    def allocate(megabytes, group):
        code = f"import numpy as np; a = np.ones({megabytes} << 20, np.uint8); print(a.sum())"
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, timeout=60, preexec_fn=group.join
        )

    with cgroups.limited(400 << 20) as group:
        assert allocate(100, group).returncode == 0
        assert 100 << 20 < group.peak() <= 400 << 20
        assert allocate(600, group).returncode == -9  # killed at the limit
    assert not list(cgroups.ROOT.glob(f"sparcml-{os.getpid()}-*"))  # removed
    # evicting a file leaves it as it was
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100_000)
    cgroups.evict(path)
    assert path.read_bytes() == b"x" * 100_000
