"""Dask on MPI: the dask-mpi bootstrap, fits on Dask arrays, lost workers, clean exits."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mpirun import MPI_ENV, MPIEXEC, run_mpi
from sklearn.datasets import load_svmlight_file
from testdata import LIBSVM, needs_a9a

from sparcml_apps import SparseSGDClassifier

pytestmark = pytest.mark.usefixtures("compiled_kernels")


def accuracy(model_vector, X, y):
    coef, intercept = model_vector[:-1], model_vector[-1]
    return np.mean(np.where(X @ coef + intercept > 0, 1.0, -1.0) == y)


def assert_clean(result):
    """No traceback and no error-level log line from any rank or the launcher."""
    for text in [result.launcher, *result.stdout, *result.stderr]:
        assert "Traceback" not in text, result.report()
        assert " - ERROR - " not in text and " - CRITICAL - " not in text, result.report()


@needs_a9a
def test_five_ranks_on_dask_reach_the_in_process_accuracy(tmp_path):
    output = tmp_path / "models.npz"
    args = (LIBSVM / "a9a", LIBSVM / "a9a.t", output, 0)
    result = run_mpi("cluster_fit.py", 5, *args, timeout=300)
    assert result.returncode == 0
    saved = np.load(output)
    X, y = load_svmlight_file(LIBSVM / "a9a", n_features=123)
    Xt, yt = load_svmlight_file(LIBSVM / "a9a.t", n_features=123)
    options = {"loss": "log_loss", "average": True, "max_iter": 5, "tol": None}
    alone = SparseSGDClassifier(random_state=0, **options).fit(X, y).score(Xt, yt)
    # spreading the rows over three workers must not cost more than 0.3 points, whether
    # each worker holds a chunk or one of them holds none
    for name in ("a9a", "halves"):
        assert accuracy(saved[name], Xt, yt) >= alone - 0.003, (name, saved[name], alone)
    assert saved["halves"].tobytes() == saved["halves_again"].tobytes()
    # sample weights, while two workers hold no chunk: the accuracy of the same weights here
    weight = np.random.default_rng(0).uniform(0.5, 2.0, X.shape[0])
    here = SparseSGDClassifier(random_state=0, **options).fit(X, y, sample_weight=weight)
    assert accuracy(saved["halves_weighted"], Xt, yt) >= here.score(Xt, yt) - 0.003
    assert_clean(result)


def state(pid):
    """The state letter of process ``pid`` ("Z" for a zombie), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def alive(pids):
    return [pid for pid in pids if state(pid) not in (None, "Z")]


def descendants(root):
    """The processes below ``root`` (children, their children, ...)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return sorted(found)


def pids_in(path):
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def test_a_worker_killed_in_a_bootstrapped_job_ends_the_job(tmp_path):
    # the client is a rank of the job: MPI ends every rank as soon as the others meet the
    # dead one in a collective, and the launcher names the process that was killed
    pids = tmp_path / "pids"
    begin = time.monotonic()
    result = run_mpi("cluster_lose_worker.py", 4, pids, timeout=60, check=False)
    assert time.monotonic() - begin < 60
    assert result.returncode != 0
    assert "Killed (signal 9)" in result.launcher, result.report()
    assert len(pids_in(pids)) == 4 and alive(pids_in(pids)) == []


def test_a_worker_killed_under_a_separate_client_is_reported_and_the_job_ends(tmp_path):
    pids, scheduler = tmp_path / "pids", tmp_path / "scheduler.json"
    command = [str(MPIEXEC), "-n", "4", str(MPIEXEC.parent / "dask-mpi"), "--scheduler-file"]
    command += [str(scheduler), "--worker-class", "distributed.Worker", "--nthreads", "1"]
    cluster = subprocess.Popen(
        [*command, "--no-dashboard"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **MPI_ENV},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not scheduler.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        ranks = descendants(cluster.pid)
        begin = time.monotonic()
        client = subprocess.run(
            [sys.executable, Path(__file__).parent / "mpi" / "cluster_lose_worker.py"]
            + [pids, scheduler],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **MPI_ENV},
        )
        assert time.monotonic() - begin < 60
        assert client.returncode == 1
        # the client names what happened: the scheduler went with the job, or the
        # worker left before the job ended
        assert client.stdout.startswith(
            ("ConnectionError: lost the Dask scheduler", "RankError: rank ")
        ), client.stdout + client.stderr
        assert "while training" in client.stdout
        cluster.wait(timeout=60 - (time.monotonic() - begin))
        assert cluster.returncode != 0
    finally:
        if cluster.poll() is None:
            os.killpg(cluster.pid, 9)
            cluster.wait()
    assert len(ranks) >= 4 and alive(ranks) == []  # no process of the cluster's job is left
