"""How a pool of ``n_jobs`` workers lives (:mod:`sparcml_apps.backends.pool`): kept across fits,
closed on demand, when idle, at exit and after a failure; reached by its user only; and
checks that raise here, as a fit in this process raises them."""

import contextlib
import gc
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
from estimator_helpers import PauseAfterEpoch1, RecordPid
from pools import descendants, digest, ended, exists, mapped_shm, socket_bytes, worker_folder
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, cross_val_score

import collectives
from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor, jobs
from sparcml_apps.backends.pool import _wire, limits

pytestmark = pytest.mark.usefixtures("compiled_kernels", "no_pools")


def data(rows=600, seed=0):
    return make_classification(n_samples=rows, n_features=20, random_state=seed)


def small(**params):
    return SparseSGDClassifier(random_state=0, max_iter=5, tol=None, n_jobs=2, **params)


def wait_until(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


# -- kept across fits ----------------------------------------------------------------


def test_a_grid_search_fits_every_candidate_on_the_same_workers(tmp_path):
    X, y = data()
    grid = {"alpha": [1e-5, 1e-4, 1e-3]}
    search = GridSearchCV(small(callback=RecordPid(tmp_path)), grid, cv=3).fit(X, y)
    pids = jobs.pool(2).pids
    # 3 candidates x 3 folds and the refit: 10 fits, every one on these two processes
    assert {int(path.name) for path in tmp_path.iterdir()} == set(pids.values())
    assert len(pids) == 2 and all(exists(pid) for pid in pids.values())
    assert cross_val_score(small(), X, y, cv=2).shape == (2,)
    assert jobs.pool(2).pids == pids
    # a kept pool fits what a new one fits
    best = search.best_estimator_
    jobs.close()
    assert digest(small(alpha=search.best_params_["alpha"]).fit(X, y)) == digest(best)
    assert jobs.pool(2).pids != pids
    # an estimator holds no pool: a clone and a pickle are plain
    again = pickle.loads(pickle.dumps(best))
    assert np.array_equal(again.predict(X), best.predict(X))
    assert not any(isinstance(v, jobs.Pool) for v in vars(clone(best)).values())


def test_partial_fit_calls_and_refits_keep_the_workers():
    X, y = data()
    model = small()
    pids = []
    for rows in np.array_split(np.arange(600), 3):
        model.partial_fit(X[rows], y[rows], classes=[0, 1])
        pids.append(jobs.pool(2).pids)
    model.set_params(warm_start=True).fit(X, y)
    pids.append(jobs.pool(2).pids)
    assert all(found == pids[0] for found in pids) and len(pids[0]) == 2
    # other numbers of workers have pools of their own; n_jobs=1 fits in this process
    SparseSGDRegressor(n_jobs=3, max_iter=2, tol=None).fit(X, y.astype(float))
    assert len(jobs.pool(3).pids) == 3 and jobs.pool(2).pids == pids[0]
    with pytest.raises(ValueError, match="A pool has 2 or more workers .* Got n_jobs=1"):
        jobs.pool(1)


def test_a_model_the_caller_drops_is_freed_then_not_at_the_next_fit():
    X, y = data()
    model = small().fit(X, y)
    state = weakref.ref(model._weights)  # what worker 0 trained, in shared memory
    del model
    gc.collect()
    assert state() is None  # the pool keeps no reference to what it returned
    assert jobs.pool(2).pids


def test_warnings_reach_the_caller_at_every_fit():
    X, y = data(300)
    for _ in range(2):
        with pytest.warns(ConvergenceWarning, match="Maximum number of iteration"):
            SparseSGDClassifier(n_jobs=2, max_iter=2).fit(X, y)


# -- closed ----------------------------------------------------------------------------


def test_close_and_the_context_manager_end_the_workers():
    X, y = data(300)
    with jobs.pool(2) as kept:
        assert kept is jobs.pool(2)
        small().fit(X, y)
        pids = kept.pids
        folder = worker_folder(pids[0])
        assert all(exists(pid) for pid in pids.values()) and folder.is_dir()
    assert not any(exists(pid) for pid in pids.values())
    assert not descendants(os.getpid()) and not folder.exists()
    assert kept.pids == {} and "closed" in repr(kept)
    small().fit(X, y)  # the next fit starts new workers
    pids = kept.pids
    jobs.close()
    assert not any(exists(pid) for pid in pids.values()) and not descendants(os.getpid())


def test_a_pool_closed_as_it_starts_leaves_nothing_at_once():
    begin = time.monotonic()
    with jobs.pool(2):
        time.sleep(0.5)  # the workers load
    assert time.monotonic() - begin < 0.5 + limits.GRACE_SECONDS / 2
    assert not descendants(os.getpid())


def test_an_idle_pool_closes(monkeypatch):
    monkeypatch.setattr(limits, "IDLE_SECONDS", 1.0)
    X, y = data(300)
    small().fit(X, y)
    pids = jobs.pool(2).pids
    assert all(exists(pid) for pid in pids.values())
    assert wait_until(lambda: not descendants(os.getpid()))
    assert jobs.pool(2).pids == {}


def test_the_workers_end_when_the_interpreter_exits(tmp_path):
    script = textwrap.dedent("""
        from sklearn.datasets import make_classification
        from sparcml_apps import SparseSGDClassifier, jobs
        X, y = make_classification(n_samples=300, n_features=5, random_state=0)
        SparseSGDClassifier(n_jobs=2, max_iter=2, tol=None).fit(X, y)
        print(*jobs.pool(2).pids.values(), flush=True)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 2 and not any(exists(pid) for pid in pids)


def test_a_forked_child_leaves_the_parents_workers_be():
    X, y = data(300)
    small().fit(X, y)
    pids = jobs.pool(2).pids
    child = os.fork()
    if child == 0:  # the child: it sees no pool, and closing ends none of the parent's
        code = 0 if jobs.pool(2).pids == {} else 1
        jobs.close()
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert all(exists(pid) for pid in pids.values())
    small().fit(X, y)
    assert jobs.pool(2).pids == pids


def test_a_worker_killed_while_idle_is_replaced(caplog):
    X, y = data(300)
    expected = digest(small().fit(X, y))
    pids = jobs.pool(2).pids
    shared = mapped_shm(pids.values())
    os.kill(pids[1], signal.SIGKILL)
    assert wait_until(lambda: ended(pids[1]))  # (unreaped: mpiexec waits for the others)
    with caplog.at_level(logging.WARNING, logger="sparcml_apps.backends.pool"):
        assert digest(small().fit(X, y)) == expected
    assert "the 2 workers of a pool had ended; starting new ones" in caplog.text
    assert not any(exists(pid) for pid in pids.values())
    assert not set(jobs.pool(2).pids.values()) & set(pids.values())
    assert shared and not [path for path in shared if path.exists()]  # MPICH's, unlinked


# -- reached by its user only ----------------------------------------------------------


class _Touch:
    """Unpickled, creates a file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_only_its_user_reaches_a_pool(tmp_path):
    X, y = data(300)
    small().fit(X, y)
    pids = jobs.pool(2).pids
    folder = worker_folder(pids[0])
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "socket").stat().st_mode & 0o077 == 0
    assert not (folder / "key").exists()  # every worker has read it

    # a process of this user without the key: refused before anything is unpickled
    marker = tmp_path / "unpickled"
    intruder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    intruder.connect(str(folder / "socket"))
    intruder.settimeout(60)
    intruder.sendall(b"sparcml-jobs 1\n" + bytes(32) + bytes(32))  # a wrong answer
    _wire.Link(intruder).send(_Touch(marker))
    heard = []
    listener = threading.Thread(target=lambda: heard.append(read_all(intruder)))
    listener.start()
    small().fit(X, y)  # the pool looks at its socket while it fits
    listener.join(60)
    intruder.close()
    assert heard and len(heard[0]) == len(b"sparcml-jobs 1\n") + 32 + 32  # then it hung up
    assert not marker.exists()
    assert jobs.pool(2).pids == pids


def read_all(sock):
    """What comes until the other end hangs up (a reset: it left what it did not read)."""
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


def test_each_worker_maps_its_rows_from_shared_memory(tmp_path):
    X, y = data(20_000)
    bounds = jobs.row_blocks(20_000, 2)
    pids, maps = {}, {}

    def shelf_in(pid):  # the mappings of the pool's shelf (the rows) that ``pid`` holds
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
        return [line.split() for line in lines if int(line.split()[4]) == shelf]

    def look():  # once both workers pause after their first epoch
        nonlocal shelf
        while len(pids) < 2:
            for rank in (0, 1):
                if (tmp_path / f"rank{rank}").exists():
                    pids[rank] = int((tmp_path / f"rank{rank}").read_text())
            time.sleep(0.05)
        shelf = os.fstat(jobs.pool(2)._shelf.fd).st_ino
        for rank, pid in pids.items():
            maps[rank] = shelf_in(pid)
        (tmp_path / "go").touch()

    shelf = None
    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    small(callback=PauseAfterEpoch1(tmp_path)).fit(X, y)
    thread.join(60)
    for rank in (0, 1):
        # private (copy-on-write) mappings of the caller's shelf: its own rows (20 nonzeros
        # a row, 12 bytes each, and a label), not the other worker's
        assert maps[rank] and all(fields[1].endswith("p") for fields in maps[rank])
        spans = [[int(end, 16) for end in fields[0].split("-")] for fields in maps[rank]]
        mapped = sum(stop - start for start, stop in spans)
        own = (bounds[rank + 1] - bounds[rank]) * (20 * 12 + 8)
        assert own <= mapped < 1.2 * own, (rank, mapped, own)
    # once the fit is over, the workers hold none of it
    assert wait_until(lambda: not any(map(shelf_in, jobs.pool(2).pids.values())))


def test_the_workers_load_the_training_code_not_scikit_learn(tmp_path):
    def loaded(pid):  # the compiled modules and shared libraries a process has mapped
        return {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}

    X, y = data()
    small().fit(X, y)
    for pid in jobs.pool(2).pids.values():
        files = loaded(pid)
        assert any("/numba/" in path for path in files)  # the compiled kernels' runtime
        assert not any("/sklearn/" in path for path in files), pid
    # a callback sees the estimator, which the workers then load, and fit as before
    small(callback=RecordPid(tmp_path)).fit(X, y)
    pids = set(jobs.pool(2).pids.values())
    assert {int(path.name) for path in tmp_path.iterdir()} == pids
    assert all(any("/sklearn/" in path for path in loaded(pid)) for pid in pids)


# -- checks raise here, as in this process ---------------------------------------------


def _nan(X, y):
    X = X.copy()
    X[3, 2] = np.nan
    return "fit", (X, y), {}, {}


def _one_row_weighted(X, y):
    weight = np.zeros(len(y))
    weight[0] = 1.0
    return "fit", (X, y), {"sample_weight": weight}, {"early_stopping": True}


BAD = {
    "nan in X": _nan,
    "no classes at the first partial_fit": lambda X, y: ("partial_fit", (X, y), {}, {}),
    "coef_init of another width": lambda X, y: (
        "fit",
        (X, y),
        {"coef_init": np.zeros(3)},
        {},
    ),  # fmt: skip
    "every weight zero": lambda X, y: ("fit", (X, y), {"sample_weight": np.zeros(len(y))}, {}),
    "a class weight of no class": lambda X, y: ("fit", (X, y), {}, {"class_weight": {7: 2.0}}),
    "held-out weights zero": _one_row_weighted,
    "more classes than partial_fit was given": lambda X, y: (
        "partial_fit",
        (X, y),
        {"classes": [0]},
        {},
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", BAD)
def test_what_a_fit_here_refuses_is_refused_alike_before_the_workers_see_it(case):
    X, y = data(300)
    small().fit(X, y)
    pids = jobs.pool(2).pids
    method, args, kwargs, params = BAD[case](X, y)
    found = []
    for n_jobs in (None, 2):
        model = SparseSGDClassifier(random_state=0, n_jobs=n_jobs, **params)
        with pytest.raises(Exception) as raised:  # noqa: B017, PT011 - compared below
            getattr(model, method)(*args, **kwargs)
        found.append((type(raised.value), str(raised.value)))
    assert found[0] == found[1]
    assert issubclass(found[0][0], ValueError) and found[0][0] is not collectives.RankError
    assert jobs.pool(2).pids == pids  # nothing failed on the workers: the pool stays


def test_warm_start_with_other_classes_is_refused_alike():
    X, y = data(300)
    found = []
    for n_jobs in (None, 2):
        model = SparseSGDClassifier(random_state=0, n_jobs=n_jobs, warm_start=True).fit(X, y)
        with pytest.raises(ValueError) as raised:  # noqa: PT011 - compared below
            model.fit(X, y + 1)
        found.append(str(raised.value))
    assert found[0] == found[1] and "warm_start=True continues" in found[0]


def test_labels_of_strings_travel_as_numbers():
    X, y = data(20_000)
    labels = np.array(["ham", "spam"], dtype=object)
    names = labels[y]  # 20,000 Python strings
    numbers = small().fit(X, y)
    sent = socket_bytes(2)[0]
    strings = small().fit(X, names)
    assert socket_bytes(2)[0] - sent < 20_000  # not a pickle of 20,000 strings
    assert digest(strings) == digest(numbers)  # "ham" < "spam" as 0 < 1
    assert list(strings.classes_) == ["ham", "spam"]
    assert np.array_equal(strings.predict(X), labels[numbers.predict(X)])
