"""Dask without mpiexec: load_dask against the readers, fit on a one-worker cluster in this
process against the in-process fit, and the errors of clusters that cannot train."""

import subprocess
import sys

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import sparse
from distributed import Client, LocalCluster
from testdata import LIBSVM, needs_a9a

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor
from sparcml_apps.datasets import convert_svmlight, load_dask, load_svmlight

pytestmark = pytest.mark.usefixtures("compiled_kernels")


def cluster(n_workers):
    """Workers as threads of this process (one thread each)."""
    return LocalCluster(
        n_workers=n_workers, processes=False, threads_per_worker=1, dashboard_address=None
    )


@pytest.fixture(scope="module")
def one_worker():
    from mpi4py import MPI  # this process is a one-rank MPI job: its worker is rank 0

    assert MPI.Is_initialized()
    with cluster(1) as local, Client(local) as client:
        yield client


def as_vector(model):
    return np.concatenate([np.ravel(model.coef_), model.intercept_])


@needs_a9a
@pytest.mark.parametrize("source", ["text", "cache"])
def test_load_dask_chunks_are_the_rows_of_the_file(tmp_path, source):
    path = LIBSVM / "a9a"
    if source == "cache":
        convert_svmlight(path, tmp_path / "cache", n_features=123)
        path = tmp_path / "cache"
    X, y = load_dask(path, n_features=123, n_chunks=3)
    assert X.numblocks == (3, 1) and np.isnan(X.shape[0]) and X.shape[1] == 123
    got_X, got_y = dask.compute(X, y, scheduler="sync")
    want_X, want_y = load_svmlight(LIBSVM / "a9a", n_features=123)
    assert sp.issparse(got_X) and (got_X != want_X).nnz == 0
    assert np.array_equal(got_y, want_y)


def test_load_dask_names_what_it_needs(tmp_path):
    (tmp_path / "data.svm").write_text("1 1:1\n-1 2:1\n")
    with pytest.raises(ValueError, match="n_features is required .* each worker sees"):
        load_dask(tmp_path / "data.svm", n_chunks=2)
    with pytest.raises(FileNotFoundError, match="no-such-set: expected a file, a CSR cache"):
        load_dask("no-such-set", n_chunks=2)
    with pytest.raises(ValueError, match="n_chunks is required when no Dask client"):
        load_dask(tmp_path / "data.svm", n_features=2)


# (before the tests that start the module's one-worker cluster)
def test_workers_that_are_not_mpi_ranks_are_refused():
    X = da.from_array(sp.random(40, 5, density=0.5, format="csr"), chunks=(20, 5), asarray=False)
    with cluster(2) as local, Client(local):
        with pytest.raises(ValueError, match="the Dask workers are not ranks of one MPI job"):
            SparseSGDClassifier().fit(X, np.arange(40) % 2)


def test_a_dask_array_without_a_client_is_refused():
    X = da.zeros((10, 3), chunks=5)
    with pytest.raises(ValueError, match="fit was given a Dask array, but no Dask client"):
        SparseSGDClassifier().fit(X, np.arange(10) % 2)


DEAF_WORKER = """
import time

from distributed import Client, LocalCluster

from sparcml_apps.cluster import _bootstrap, shutdown


async def deaf(seconds):
    time.sleep(seconds)  # holds the worker's event loop: it answers nothing meanwhile


if __name__ == "__main__":
    _bootstrap.SHUTDOWN_SECONDS = 1.0
    local = LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None)
    with local, Client(local) as client:
        client.run(deaf, 4, wait=False)
        time.sleep(0.5)  # (on its way)
        begin = time.monotonic()
        try:
            shutdown(client)
            print("returned", time.monotonic() - begin)
        except TimeoutError as exc:
            print("raised", time.monotonic() - begin, exc)
"""


def test_shutdown_gives_up_on_a_worker_that_does_not_answer(tmp_path):
    # in a process of its own: a cluster of worker processes leaves helpers behind
    # (multiprocessing's) until the process that started it ends
    script = tmp_path / "deaf_worker.py"
    script.write_text(DEAF_WORKER)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    outcome, seconds, message = done.stdout.strip().split(maxsplit=2)
    assert (outcome, message) == ("raised", "the workers did not retire in 1.0 s")
    assert float(seconds) < 2.5  # not the 4 s the worker stays deaf


@needs_a9a
def test_one_worker_fits_as_this_process_does(one_worker):
    X, y = load_svmlight(LIBSVM / "a9a", n_features=123)
    weight = np.random.default_rng(0).uniform(0.5, 2.0, X.shape[0])
    options = {"loss": "log_loss", "max_iter": 3, "tol": None, "random_state": 0}
    here = SparseSGDClassifier(**options).fit(X, y, sample_weight=weight)
    X_chunks, y_chunks = load_dask(LIBSVM / "a9a", n_features=123, n_chunks=3)
    with pytest.raises(ValueError, match="sample_weight must be a Dask array when X has chunks"):
        SparseSGDClassifier(**options).fit(X_chunks, y_chunks, sample_weight=weight)
    X_chunks = X_chunks.compute_chunk_sizes()  # numpy weights are cut to the chunks of X
    # three chunks on one worker are stacked in row order: the same rows, the same model
    there = SparseSGDClassifier(**options).fit(X_chunks, y_chunks, sample_weight=weight)
    assert as_vector(there).tobytes() == as_vector(here).tobytes()
    assert there.n_features_in_ == 123 and there.comm_stats_[-1]["epoch"] == 3


@pytest.mark.parametrize("chunk", ["scipy", "pydata"])
def test_partial_fit_and_regression_on_dask_arrays(one_worker, chunk):
    rng = np.random.default_rng(1)
    X = sp.random(600, 30, density=0.2, format="csr", random_state=2)
    y = X @ rng.normal(size=30) + 0.1 * rng.normal(size=600)
    labels = np.where(y > np.median(y), "high", "low")
    held = X if chunk == "scipy" else sparse.COO.from_scipy_sparse(X)
    X_chunks = da.from_array(held, chunks=(200, 30), asarray=False)
    for make, target, kwargs in [
        (SparseSGDRegressor, y, {}),
        (SparseSGDClassifier, labels, {"classes": ["high", "low"]}),
    ]:
        here = make(random_state=0).partial_fit(X, target, **kwargs)
        there = make(random_state=0).partial_fit(X_chunks, target, **kwargs)
        assert as_vector(there).tobytes() == as_vector(here).tobytes()
