"""Fits on ``n_jobs`` worker processes (:mod:`sparcml_apps.backends.pool`): the model of
``mpiexec -n N`` on the same rows, bit for bit, and a caller that outlives its workers.
How a pool lives (kept, closed, reached) is in test_jobs_pool.py."""

import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import joblib
import numpy as np
import pytest
from estimator_helpers import (
    PauseAfterEpoch1,
    exit_on_rank1_at_epoch2,
    fail_on_rank1_as_rank0_waits,
    fail_on_rank1_at_epoch2,
    run_out_of_memory_in_rank1s_next_exchange,
)
from mpirun import run_mpi
from pools import (
    descendants,
    digest,
    exists,
    mapped_shm,
    socket_bytes,
    worker_folder,
)
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from testdata import url_like

import collectives
from sparcml_apps import SparseSGDClassifier, jobs
from sparcml_apps.backends.pool import limits

pytestmark = pytest.mark.usefixtures("compiled_kernels", "no_pools")

URL_WIDTH = 3_231_961
MEMORY_CGROUPS = Path("/sys/fs/cgroup/memory")


# -- the same model as mpiexec -------------------------------------------------------


@pytest.mark.parametrize(
    ("n_jobs", "classes", "method"),
    [
        pytest.param(2, 2, "fit", marks=pytest.mark.bench),  # n_jobs=2 at url's width: below
        (3, 2, "fit"),
        (2, 3, "partial_fit"),
        (2, 2, "warm_start"),
        pytest.param(3, 20, "partial_fit", marks=pytest.mark.bench),
    ],
    ids=["binary-fit-2", "binary-fit-3", "3-classes-partial_fit-2", "warm_start-2", "20-classes-3"],
)
def test_url_width_equals_mpiexec_bit_for_bit(n_jobs, classes, method):
    # 3 classes: a state of 3 x 3.2M float64 (78 MB) in coef_ and again in the weights,
    # sent back after each call and to every worker for the second call; 20 classes: 517 MB
    rows = 2000
    result = run_mpi(
        "fit_blocks.py", n_jobs, rows, URL_WIDTH, classes, method, "random_state=0",
        timeout=300,
    )  # fmt: skip
    expected, nonzero = result.stdout[0].split()
    assert int(nonzero) > 1000
    X, y = url_like(rows, URL_WIDTH, classes)
    model = SparseSGDClassifier(random_state=0, n_jobs=n_jobs, warm_start=method == "warm_start")
    if method == "fit":
        model.fit(X, y)
    else:
        pids = []
        for _ in range(2):  # the second call ships the fitted state to the same workers
            if method == "partial_fit":
                model.partial_fit(X, y, classes=np.unique(y))
            else:
                model.fit(X, y)
            pids.append(jobs.pool(n_jobs).pids)
        assert pids[0] == pids[1] and len(pids[0]) == n_jobs
    assert model.coef_.shape == (1 if classes == 2 else classes, URL_WIDTH)
    assert digest(model) == expected


def test_the_rows_go_in_shared_memory_not_through_the_socket():
    X, y = url_like(20_000, 100_000)
    data_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    model = SparseSGDClassifier(random_state=0, max_iter=1, tol=None, n_jobs=2)
    tracemalloc.start()
    try:
        for _ in range(2):  # the first fit also starts the pool
            sent, received = socket_bytes(2)
            model.fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    sent, received = np.subtract(socket_bytes(2), (sent, received))
    # the socket carries two pickles of the estimator out (its parameters) and two ends
    # back; the fitted state (2 x 0.8 MB of weights) comes in shared memory too
    assert sent < 0.01 * data_bytes and received < 0.01 * data_bytes, (sent, received)
    # nor does this process copy the rows into new arrays: it writes them into its shelf
    assert peak < 0.2 * data_bytes, (peak, data_bytes)


def test_n_jobs_minus_one_is_one_worker_a_core():
    cores = joblib.cpu_count()
    if cores < 2:
        pytest.skip("one core: n_jobs=-1 fits in this process")
    X, y = make_classification(n_samples=600, n_features=10, random_state=0)
    every_core = SparseSGDClassifier(random_state=0, n_jobs=-1).fit(X, y)
    assert digest(every_core) == digest(SparseSGDClassifier(random_state=0, n_jobs=cores).fit(X, y))
    assert digest(every_core) != digest(SparseSGDClassifier(random_state=0).fit(X, y))


def test_negative_n_jobs_counts_from_the_cores(monkeypatch):
    monkeypatch.setattr(joblib, "cpu_count", lambda: 8)
    counts = {n: jobs.workers(n) for n in (None, 1, 3, -1, -2, -8, -20)}
    assert counts == {None: 1, 1: 1, 3: 3, -1: 8, -2: 7, -8: 1, -20: 1}


def test_n_jobs_zero_is_refused():
    X, y = make_classification(n_samples=50, n_features=4, random_state=0)
    with pytest.raises(ValueError, match="'n_jobs' parameter .* Got 0 instead"):
        SparseSGDClassifier(n_jobs=0).fit(X, y)


def test_a_refit_learns_the_new_width():
    X, y = make_classification(n_samples=300, n_features=10, random_state=0)
    model = SparseSGDClassifier(random_state=0, n_jobs=2).fit(X, y)
    model.fit(X[:, :4], y)
    assert model.coef_.shape == (1, 4) and model.n_features_in_ == 4
    assert digest(model) == digest(SparseSGDClassifier(random_state=0, n_jobs=2).fit(X[:, :4], y))
    with pytest.raises(ValueError, match="X has 10 features, but .* is expecting 4"):
        model.partial_fit(X, y)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_more_workers_than_rows(weighted):
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]])
    y = np.array([1, 0, 1])
    weight = np.array([1.0, 2.0, 1.0]) if weighted else None
    # row_blocks(3, 4): worker 0 holds no rows
    model = SparseSGDClassifier(random_state=0, n_jobs=4, max_iter=20, tol=None)
    model.fit(X, y, sample_weight=weight)
    assert model.score(X, y) == 1.0


# -- the caller outlives its workers -------------------------------------------------


def paused_fit(tmp_path, act, **params):
    """Fit on two workers that pause after epoch 1; meanwhile ``act(pids)`` on them, then
    let them go on. The exception the fit raised, the pids, and the seconds from the act."""
    pids, acted, folders = {}, [], []

    def meddle():
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline:
            for rank in (0, 1):
                mine = tmp_path / f"rank{rank}"
                if mine.exists():
                    pids[rank] = int(mine.read_text())
            time.sleep(0.05)
        folders.append((worker_folder(pids[0]), worker_folder(pids[0]).is_dir()))
        act(pids)
        acted.append(time.monotonic())
        (tmp_path / "go").touch()

    X, y = make_classification(n_samples=400, n_features=20, random_state=0)
    X, y = params.pop("data", (X, y))
    model = SparseSGDClassifier(
        n_jobs=2, max_iter=5, tol=None, callback=PauseAfterEpoch1(tmp_path), **params
    )
    thread = threading.Thread(target=meddle, daemon=True)
    thread.start()
    with pytest.raises(collectives.RankError) as raised:
        model.fit(X, y)
    seconds = time.monotonic() - acted[0]
    print(f"{seconds:.1f} s from the act to: {raised.value}")  # shown by pytest -s
    thread.join()
    assert not hasattr(model, "coef_")
    folder, was_there = folders[0]
    assert was_there and folder.name.startswith("sparcml-jobs-")
    assert not folder.exists()  # gone with the workers
    return raised.value, pids, seconds


def assert_nothing_left(pids):
    assert not [pid for pid in pids.values() if exists(pid)]
    assert not descendants(os.getpid())


def assert_a_normal_fit_follows(pids):
    """A fit after the failure works, on a new pool."""
    X, y = make_classification(n_samples=300, n_features=10, random_state=1)
    assert SparseSGDClassifier(random_state=0, n_jobs=2).fit(X, y).score(X, y) > 0.7
    assert not set(jobs.pool(2).pids.values()) & set(pids.values())


def test_a_worker_killed_by_sigkill(tmp_path):
    shared = set()

    def kill(pids):
        shared.update(mapped_shm(pids.values()))
        os.kill(pids[1], signal.SIGKILL)

    error, pids, seconds = paused_fit(tmp_path, kill)
    assert shared and not [path for path in shared if path.exists()]  # MPICH's, unlinked
    assert seconds < 30
    assert str(error) == (
        f"rank 1 failed: its worker process (pid {pids[1]}) was killed by signal 9 (SIGKILL)"
    )
    assert_nothing_left(pids)
    assert_a_normal_fit_follows(pids)


def test_a_worker_that_crashes(tmp_path):
    error, pids, seconds = paused_fit(tmp_path, lambda pids: os.kill(pids[1], signal.SIGSEGV))
    assert seconds < 30
    assert str(error) == (
        f"rank 1 failed: its worker process (pid {pids[1]}) was killed by signal 11 (SIGSEGV)"
    )
    assert_nothing_left(pids)


def test_a_worker_that_stops_responding(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "SILENCE_SECONDS", 4.0)  # three missed heartbeats, not nine
    error, pids, seconds = paused_fit(tmp_path, lambda pids: os.kill(pids[1], signal.SIGSTOP))
    assert seconds < 30
    assert f"rank 1 failed: its worker process (pid {pids[1]}) sent no heartbeat for" in str(error)
    assert "it is stopped (as by SIGSTOP); every worker was killed" in str(error)
    assert_nothing_left(pids)
    assert_a_normal_fit_follows(pids)


def wide_multiclass(rows=400, n_features=1_000_000, classes=10):
    """Rows whose model (classes x n_features float64) is 80 MB: a worker allocates it
    again after every epoch (the callback's coef_)."""
    X, _ = url_like(rows, n_features)
    return X, np.arange(rows) % classes


def test_a_worker_out_of_address_space(tmp_path):
    def limit(pids):  # what it holds now and 16 MB more
        size = int(next(line for line in Path(f"/proc/{pids[1]}/status").read_text().splitlines()
                        if line.startswith("VmSize:")).split()[1]) * 1024  # fmt: skip
        resource.prlimit(pids[1], resource.RLIMIT_AS, (size + (16 << 20), resource.RLIM_INFINITY))

    error, pids, seconds = paused_fit(tmp_path, limit, data=wide_multiclass())
    assert seconds < 30
    assert str(error).startswith("rank 1 failed: MemoryError: Unable to allocate"), str(error)
    assert_nothing_left(pids)
    assert_a_normal_fit_follows(pids)


@pytest.mark.skipif(
    not os.access(MEMORY_CGROUPS, os.W_OK), reason="no writable cgroup v1 memory controller"
)
def test_a_worker_ended_by_the_out_of_memory_killer(tmp_path):
    group = MEMORY_CGROUPS / f"sparcml-test-{os.getpid()}"
    group.mkdir()
    try:

        def confine(pids):  # new allocations only count: the next 80 MB exceed 32 MB
            (group / "memory.limit_in_bytes").write_text(str(32 << 20))
            (group / "cgroup.procs").write_text(str(pids[1]))

        error, pids, seconds = paused_fit(tmp_path, confine, data=wide_multiclass())
    finally:
        deadline = time.monotonic() + 10
        while (group / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.1)
        group.rmdir()
    assert seconds < 30
    assert str(error) == (
        f"rank 1 failed: its worker process (pid {pids[1]}) was killed by signal 9 (SIGKILL); "
        "the kernel's out-of-memory killer ended a process meanwhile, so it most likely ran "
        "out of memory"
    )
    assert_nothing_left(pids)
    assert_a_normal_fit_follows(pids)


def test_an_exception_in_a_worker_reaches_the_caller():
    X, y = make_classification(n_samples=1000, n_features=20, random_state=0)
    model = SparseSGDClassifier(n_jobs=3, max_iter=5, tol=None).fit(X, y)
    before = digest(model)
    model.callback = fail_on_rank1_at_epoch2
    begin = time.monotonic()
    with pytest.raises(collectives.RankError, match="rank 1 failed: RuntimeError: rank 1 gives"):
        model.fit(X[:, :5], y)  # another width: the failed refit leaves the model as it was
    assert time.monotonic() - begin < 30
    assert digest(model) == before and model.n_features_in_ == 20
    assert not descendants(os.getpid())


def failing_fit(callback, n_samples):
    """A fit on 2 workers that ``callback`` makes fail: the model, the data, the error it
    raised and the seconds it took."""
    X, y = make_classification(n_samples=n_samples, n_features=20, random_state=0)
    model = SparseSGDClassifier(n_jobs=2, callback=callback, max_iter=5, tol=None)
    begin = time.monotonic()
    with pytest.raises(collectives.RankError) as raised:
        model.fit(X, y)
    return model, (X, y), raised.value, time.monotonic() - begin


def test_a_worker_that_fails_while_another_waits_in_a_call_of_its_own(monkeypatch):
    monkeypatch.setattr(limits, "STRANDED_SECONDS", 2.0)
    model, (X, y), error, seconds = failing_fit(fail_on_rank1_as_rank0_waits, 1000)
    assert seconds < 30  # not the heartbeat's silence: both beat on
    assert str(error) == (
        "rank 1 failed: RuntimeError: rank 1 gives up at epoch 1 (worker(s) 0 had not stopped "
        "with it 2 s later, and every worker was killed)"
    )
    assert not hasattr(model, "coef_")
    assert not descendants(os.getpid())
    assert SparseSGDClassifier(n_jobs=2, max_iter=5, tol=None).fit(X, y).score(X, y) > 0.7


def test_a_worker_that_exits():
    _, _, error, _ = failing_fit(exit_on_rank1_at_epoch2, 3000)
    assert re.fullmatch(
        r"rank 1 failed: its worker process \(pid \d+\) exited with code 5 before reporting; "
        r"it printed last: rank 1 leaves at epoch 2",
        str(error),
    )
    assert not descendants(os.getpid())


def test_a_worker_that_fails_inside_an_exchange():
    # the other worker waits for it inside the collective call: the worker ends the MPI job,
    # and the caller is told which worker did and why
    _, (X, y), error, seconds = failing_fit(run_out_of_memory_in_rank1s_next_exchange, 3000)
    assert seconds < 30
    assert re.fullmatch(
        r"rank 1 failed: its worker process \(pid \d+\) ended the MPI job \(MPI_Abort\); it "
        r"printed last: MemoryError: no room for the values received \| collectives: rank 1 "
        r"of 2 failed inside an allreduce that every rank had agreed to run .*",
        str(error),
    )
    assert not descendants(os.getpid())
    assert SparseSGDClassifier(n_jobs=2, max_iter=5, tol=None).fit(X, y).score(X, y) > 0.7


def test_workers_that_cannot_start(monkeypatch):
    monkeypatch.setattr(limits, "WORKER", "sparcml_apps._no_such_module")
    X, y = make_classification(n_samples=100, n_features=5, random_state=0)
    with pytest.raises(RuntimeError) as raised:
        SparseSGDClassifier(n_jobs=2).fit(X, y)
    assert str(raised.value).startswith("n_jobs=2: the workers did not start: mpiexec ended")
    assert "No module named sparcml_apps._no_such_module" in str(raised.value)
    assert not descendants(os.getpid())


def test_what_workers_print_and_warn_reaches_the_caller(capsys):
    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    with pytest.warns(ConvergenceWarning, match="Maximum number of iteration reached"):
        SparseSGDClassifier(n_jobs=2, max_iter=2, verbose=1).fit(X, y)
    assert capsys.readouterr().out.count("-- Epoch") == 2  # rank 0's, with verbose=1


def test_what_cannot_travel_to_the_workers_fails_before_anything_starts():
    X, y = make_classification(n_samples=100, n_features=5, random_state=0)
    model = SparseSGDClassifier(n_jobs=2, callback=lambda estimator, record: None)
    with pytest.raises(TypeError, match="n_jobs=2 sends the estimator .* cannot be pickled"):
        model.fit(X, y)
    assert jobs.pool(2).pids == {} and not descendants(os.getpid())


def start_paused_caller(tmp_path):
    """A Python process fitting on two workers that pause after epoch 1; it and the
    workers' pids once they pause."""
    caller = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {[str(Path(__file__).parent)]!r}
        from estimator_helpers import PauseAfterEpoch1
        from sklearn.datasets import make_classification
        from sparcml_apps import SparseSGDClassifier
        X, y = make_classification(n_samples=400, n_features=20, random_state=0)
        try:
            SparseSGDClassifier(n_jobs=2, callback=PauseAfterEpoch1({str(tmp_path)!r})).fit(X, y)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", caller], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("rank?"))) < 2 and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    return process, {rank: int((tmp_path / f"rank{rank}").read_text()) for rank in (0, 1)}


def test_ctrl_c_in_the_caller_stops_the_workers(tmp_path):
    process, pids = start_paused_caller(tmp_path)
    try:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert out == "interrupted\n", err
    assert not [pid for pid in pids.values() if exists(pid)]


def test_workers_leave_when_their_caller_is_killed(tmp_path):
    process, pids = start_paused_caller(tmp_path)
    folder = worker_folder(pids[0])
    assert folder.is_dir()
    process.kill()
    process.wait()
    deadline = time.monotonic() + 30
    while any(exists(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids.values() if exists(pid)]
    assert not folder.exists()  # the caller's folder, removed by the workers
