"""The estimators on several ranks: under mpiexec (SPMD), and n_jobs against it on a9a."""

import contextlib
import io
import json
import runpy
import time

import numpy as np
import pytest
from mpirun import SCRIPTS, run_mpi
from sklearn.datasets import load_svmlight_file
from sklearn.model_selection import StratifiedShuffleSplit
from testdata import LIBSVM, needs_a9a

from sparcml_apps import SparseSGDClassifier

pytestmark = pytest.mark.usefixtures("compiled_kernels")


def spmd_models(tmp_path, nprocs, seeds, *options):
    output = tmp_path / f"models_{nprocs}.npz"
    run_mpi(
        "fit_spmd.py", nprocs, LIBSVM / "a9a", 123, output, ",".join(map(str, seeds)),
        *options, timeout=600,
    )  # fmt: skip
    saved = np.load(output)
    return [saved[f"model_{seed}"] for seed in seeds]


def accuracy(model_vector, X, y):
    coef, intercept = model_vector[:-1], model_vector[-1]
    return np.mean(np.where(X @ coef + intercept > 0, 1.0, -1.0) == y)


@needs_a9a
@pytest.mark.bench  # accuracy on 2 and 4 ranks at size: sparcml bench scaling; make test has
# three Dask workers (test_cluster_mpi) and two ranks (test_curves)
@pytest.mark.parametrize("loss", ["hinge", "log_loss"])
def test_four_ranks_reach_the_in_process_accuracy(tmp_path, loss):
    X, y = load_svmlight_file(LIBSVM / "a9a", n_features=123)
    Xt, yt = load_svmlight_file(LIBSVM / "a9a.t", n_features=123)
    seeds = range(4)
    # the script exits non-zero unless every rank holds the same model, bit for bit
    spread = spmd_models(tmp_path, 4, seeds, f"loss={loss!r}")
    together = np.mean([accuracy(m, Xt, yt) for m in spread])
    alone = np.mean(
        [SparseSGDClassifier(loss=loss, random_state=s).fit(X, y).score(Xt, yt) for s in seeds]
    )
    # spreading the rows over ranks must not cost more than 0.3 points
    assert together >= alone - 0.003, (together, alone)


@needs_a9a
@pytest.mark.usefixtures("no_pools")
def test_n_jobs_equals_mpiexec_bit_for_bit(tmp_path):
    X, y = load_svmlight_file(LIBSVM / "a9a", n_features=123)
    first, again = (spmd_models(tmp_path, 2, [7], "loss='log_loss'")[0] for _ in range(2))
    assert first.tobytes() == again.tobytes()
    workers = SparseSGDClassifier(loss="log_loss", random_state=7, n_jobs=2).fit(X, y)
    assert np.concatenate([workers.coef_.ravel(), workers.intercept_]).tobytes() == (
        first.tobytes()
    )


@needs_a9a
def test_overlap_and_quantization_keep_ranks_identical_and_accurate(tmp_path):
    Xt, yt = load_svmlight_file(LIBSVM / "a9a.t", n_features=123)
    # a sparse algorithm (auto sums a9a's 124 entries dense, which is exact); averaging
    # keeps five epochs' accuracy from swinging with the seed
    common = ("loss='log_loss'", "max_iter=5", "tol=None", "average=True",
              "allreduce='ssar_split_allgather'")  # fmt: skip
    options = (*common, "overlap=True", "quantization_bits=4")
    seeds = [3, 4]
    # the script exits non-zero unless every rank holds the same model, bit for bit
    first, again = (spmd_models(tmp_path, 3, seeds, *options) for _ in range(2))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, again, strict=True))
    exact = spmd_models(tmp_path, 3, seeds, *common)
    assert all(a.tobytes() != b.tobytes() for a, b in zip(first, exact, strict=True))
    # 4-bit values of the changes cost a little accuracy:
    # at most half a point over two seeds
    quantized = np.mean([accuracy(m, Xt, yt) for m in first])
    assert quantized >= np.mean([accuracy(m, Xt, yt) for m in exact]) - 0.005


@pytest.mark.parametrize(
    ("case", "culprit", "message", "overlap"),
    [
        ("callback", 1, "RuntimeError: rank 1 gives up at epoch 2", ""),
        ("data", 2, "ValueError: Input X contains NaN", ""),
        ("callback", 1, "RuntimeError: rank 1 gives up at epoch 2", "overlap"),
    ],
)
def test_a_failing_rank_stops_every_rank(case, culprit, message, overlap):
    begin = time.monotonic()
    result = run_mpi("fit_failing.py", 4, case, overlap, timeout=60)
    assert time.monotonic() - begin < 30
    for rank, out in enumerate(result.stdout):
        if rank == culprit:
            assert out.startswith(message), result.report()
        else:
            assert out.startswith(f"RankError: rank {culprit} failed: {message}"), out


def test_a_rank_without_rows_takes_part():
    result = run_mpi("fit_empty_rank.py", 3, timeout=120)
    answers = [out.split() for out in result.stdout]
    assert len({digest for _, digest, *_ in answers}) == 1  # one model on every rank
    assert float(answers[0][0]) > 0.8
    assert result.stdout[1].endswith("['no', 'yes']\n")
    # sample weights (an empty array on the rank without rows): weights of one change nothing
    assert all(weighted == digest for _, digest, weighted, *_ in answers), result.report()


@pytest.mark.parametrize(("nprocs", "during"), [(1, 2), (2, 1)])
def test_ranks_train_with_one_thread_in_their_blas(nprocs, during):
    # two threads a pool, as where mpiexec alone starts the ranks; the fit on several
    # ranks takes them down to one while it trains, and gives them back
    answers = [json.loads(out) for out in run_mpi("blas_threads.py", nprocs).stdout]
    if answers[0]["before"] < 2:
        pytest.skip("this machine's BLAS takes one thread only")
    for answer in answers:
        assert answer == {"before": 2, "during": [during, during], "after": 2}, answers


def test_no_rows_on_any_rank_is_an_error():
    result = run_mpi("fit_empty_rank.py", 2, "none", timeout=120)
    for out in result.stdout:
        assert out.startswith("ValueError: Found array with 0 sample(s) on all 2 ranks"), out


@pytest.fixture(scope="module")
def early_stopping_splits():
    # one rank: the script in this process (a one-rank MPI job)
    with contextlib.redirect_stdout(io.StringIO()) as alone:
        runpy.run_path(str(SCRIPTS / "early_stopping_split.py"), run_name="__main__")
    spread = {
        nprocs: json.loads(run_mpi("early_stopping_split.py", nprocs, timeout=120).stdout[0])
        for nprocs in (4,)
    }
    return {1: json.loads(alone.getvalue()), **spread}


@pytest.mark.parametrize("nprocs", [4])
def test_early_stopping_holds_out_the_same_rows_on_any_number_of_ranks(
    early_stopping_splits, nprocs
):
    alone, spread = early_stopping_splits[1], early_stopping_splits[nprocs]
    assert spread["held"] == alone["held"]
    # as many rows of each class as scikit-learn's stratified split holds out
    labels = np.random.default_rng(0).choice(3, size=103, p=[0.5, 0.3, 0.2])
    split = StratifiedShuffleSplit(test_size=0.25, random_state=0)
    _, test = next(split.split(np.zeros((103, 1)), labels))
    counts = np.bincount(labels[test], minlength=3)
    assert np.array_equal(np.bincount(labels[alone["held"]], minlength=3), counts)
    # 12 rows on 4 ranks of 3: 2 held out in all, as scikit-learn's split of 12 rows
    assert spread["rows"] == alone["rows"] == 10


def test_ranks_that_disagree_are_told_what_differs():
    result = run_mpi("fit_disagree.py", 3, timeout=120)
    for out in result.stdout:
        lines = dict(line.split(": ", 1) for line in out.splitlines())
        assert lines["dtype"] == (
            "ValueError: The ranks passed X of different dtypes: 'float64' on ranks 0, 2; "
            "'float32' on rank 1. Every rank must pass the same dtype (float32 or float64)."
        )
        assert lines["batch_size"] == (
            "ValueError: The 'batch_size' parameter of SparseSGDClassifier must be the same "
            "on every rank. Got 16 on ranks 0, 2; 17 on rank 1."
        )
        assert lines["classes"].startswith(
            "ValueError: The 'classes' of partial_fit must be the same on every rank. Got "
            "[0, 1] on ranks 0, 2; [0, 1, 2] on rank 1."
        )
        # a rank without rows takes the dtype of those with rows
        assert lines["empty"] == "ok float32"
