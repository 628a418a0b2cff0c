"""Checkpoints of a fit and resuming from them: a run stopped in epoch 3 of 5 and resumed
ends with the model of a run never stopped, bit for bit; a checkpoint of another run is
refused, naming what differs; a damaged newest checkpoint gives way to the one before."""

import hashlib
import json
import subprocess
import sys
import warnings

import joblib
import numpy as np
import pytest
from estimator_helpers import stop_at_epoch2
from mpirun import run_mpi
from testdata import url_like

import collectives
from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor, jobs
from sparcml_apps.estimators import _base
from sparcml_apps.training import checkpoint, loop
from sparcml_apps.training.checkpoint import CheckpointWarning

pytestmark = pytest.mark.usefixtures("compiled_kernels")


class Stop(Exception):
    pass


def stop_at_epoch(epoch):
    def callback(estimator, record):
        if record["epoch"] == epoch:
            raise Stop

    return callback


def digest(model):
    return hashlib.sha256(model.coef_.tobytes() + model.intercept_.tobytes()).hexdigest()


def losses(model):
    return [record["loss"] for record in model.comm_stats_]


@pytest.fixture(scope="module")
def data():
    X, y = url_like(3000, 20_000)
    return X, y


OPTIONS = [
    {},
    {"penalty": "l1", "batch_size": 4},
    {"compression": "topk", "topk": 0.01, "batch_size": 8, "local_steps": 10},
    {"learning_rate": "adaptive", "eta0": 0.1, "tol": 1e-2, "n_iter_no_change": 1},
    {"early_stopping": True, "loss": "log_loss"},
]


@pytest.mark.parametrize("seconds", [None, 1e-9], ids=["after-epochs", "within-epochs"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_a_fit_stopped_in_epoch_3_resumes_to_the_same_model(
    data, tmp_path, monkeypatch, options, seconds
):
    X, y = data
    monkeypatch.setattr(loop, "PAUSE_STEPS", 500)  # one rank alone pauses every 500 steps
    common = dict(random_state=0, max_iter=5, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        never = SparseSGDClassifier(**common).fit(X, y)
        saving = dict(checkpoint=tmp_path, checkpoint_seconds=seconds)
        with pytest.raises(Stop):
            SparseSGDClassifier(**common, **saving, callback=stop_at_epoch(3)).fit(X, y)
        from mpi4py import MPI

        saved = checkpoint.latest(tmp_path, MPI.COMM_SELF).metadata["progress"]
        # after epoch 2, or within epoch 3
        assert (saved["epochs"], saved["step"] > 0) == ((2, True) if seconds else (2, False))
        resumed = SparseSGDClassifier(**common, **saving, resume=True).fit(X, y)
    assert digest(resumed) == digest(never)
    assert resumed.n_iter_ == never.n_iter_ and losses(resumed) == losses(never)


@pytest.mark.parametrize("seconds", [None, 1e-9], ids=["after-epochs", "within-epochs"])
def test_a_fit_stopping_on_held_out_rows_resumes_to_the_same_epoch(
    data, tmp_path, monkeypatch, seconds
):
    # early_stopping="auto" on 3,000 rows: the decisions pair the held-out rows' scores
    # with the best model's, which the checkpoint carries
    X, y = data
    monkeypatch.setattr(_base, "EARLY_STOPPING_ROWS", 1000)
    monkeypatch.setattr(loop, "PAUSE_STEPS", 500)
    common = dict(random_state=0, max_iter=40, n_iter_no_change=3, loss="log_loss")
    never = SparseSGDClassifier(**common).fit(X, y)
    assert 4 < never.n_iter_ < 40
    scores = [record["validation_score"] for record in never.comm_stats_]
    assert None not in scores
    saving = dict(checkpoint=tmp_path, checkpoint_seconds=seconds)
    with pytest.raises(Stop):
        SparseSGDClassifier(**common, **saving, callback=stop_at_epoch(3)).fit(X, y)
    resumed = SparseSGDClassifier(**common, **saving, resume=True).fit(X, y)
    assert digest(resumed) == digest(never) and resumed.n_iter_ == never.n_iter_
    assert [record["validation_score"] for record in resumed.comm_stats_] == scores


def test_resume_without_a_checkpoint_starts_afresh_and_a_finished_run_stays(data, tmp_path):
    X, y = data
    common = dict(random_state=0, max_iter=3, tol=None, checkpoint=tmp_path / "new")
    first = SparseSGDClassifier(**common, resume=True).fit(X, y)
    assert digest(first) == digest(SparseSGDClassifier(random_state=0, max_iter=3, tol=None)
                                   .fit(X, y))  # fmt: skip
    again = SparseSGDClassifier(**common, resume=True).fit(X, y)
    assert digest(again) == digest(first) and again.n_iter_ == 3
    # more epochs than the checkpoint's run: it goes on from there
    longer = SparseSGDClassifier(**{**common, "max_iter": 4}, resume=True).fit(X, y)
    never = SparseSGDClassifier(random_state=0, max_iter=4, tol=None).fit(X, y)
    assert digest(longer) == digest(never)


def test_the_regressor_resumes_too(tmp_path):
    X, y = url_like(2000, 5000)
    target = np.asarray(X[:, :50].sum(axis=1)).ravel()
    common = dict(random_state=0, max_iter=4, tol=None, checkpoint=tmp_path)
    never = SparseSGDRegressor(random_state=0, max_iter=4, tol=None).fit(X, target)
    with pytest.raises(Stop):
        SparseSGDRegressor(**common, callback=stop_at_epoch(2)).fit(X, target)
    resumed = SparseSGDRegressor(**common, resume=True).fit(X, target)
    assert digest(resumed) == digest(never)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"batch_size": 2}, "batch_size was 1, now 2"),
        ({"alpha": 1e-3}, "alpha was 0.0001, now 0.001"),
        ({"loss": "log_loss"}, 'loss was "hinge", now "log_loss"'),
        ({"random_state": 1}, "seed was"),
        ({"rows": 2999}, "rows was 3000, now 2999"),
        ({"labels": True}, "checksum was"),
    ],
)
def test_a_checkpoint_of_other_options_or_data_is_refused(data, tmp_path, change, named):
    X, y = data
    with pytest.raises(Stop):
        SparseSGDClassifier(
            random_state=0, max_iter=5, checkpoint=tmp_path, callback=stop_at_epoch(2)
        ).fit(X, y)
    options = {k: v for k, v in change.items() if k not in ("rows", "labels")}
    if "rows" in change:
        X, y = X[: change["rows"]], y[: change["rows"]]
    if "labels" in change:
        y = y.copy()
        y[0] = -y[0]
    model = SparseSGDClassifier(
        **{"random_state": 0, "max_iter": 5, **options}, checkpoint=tmp_path, resume=True
    )
    with pytest.raises(ValueError, match="cannot resume from .*checkpoint-000001") as raised:
        model.fit(X, y)
    assert named in str(raised.value)


def test_n_jobs_workers_checkpoint_and_resume_as_ranks_do(data, tmp_path):
    X, y = data
    common = dict(random_state=0, max_iter=4, tol=None, n_jobs=2, checkpoint=tmp_path)
    try:
        never = SparseSGDClassifier(random_state=0, max_iter=4, tol=None, n_jobs=2).fit(X, y)
        with pytest.raises(collectives.RankError, match="stopped at epoch 2"):
            SparseSGDClassifier(**common, callback=stop_at_epoch2).fit(X, y)
        assert sorted(p.name for p in (tmp_path / "checkpoint-000001").glob("rank-*.npz")) == [
            "rank-0.npz",
            "rank-1.npz",
        ]
        resumed = SparseSGDClassifier(**common, resume=True).fit(X, y)
    finally:
        jobs.close()
    assert resumed.resumed_from_.endswith("checkpoint-000001")
    assert digest(resumed) == digest(never) and resumed.n_iter_ == 4
    # the two workers' checkpoint is not one rank's
    one = SparseSGDClassifier(**{**common, "n_jobs": None}, resume=True)
    with pytest.raises(ValueError, match="written by 2 ranks, this run has 1"):
        one.fit(X, y)


def test_a_damaged_newest_checkpoint_gives_way_to_the_previous(data, tmp_path):
    X, y = data
    common = dict(random_state=0, max_iter=5, tol=None, checkpoint=tmp_path)
    never = SparseSGDClassifier(random_state=0, max_iter=5, tol=None).fit(X, y)
    with pytest.raises(Stop):
        SparseSGDClassifier(**common, callback=stop_at_epoch(4)).fit(X, y)
    newest = tmp_path / "checkpoint-000003" / "rank-0.npz"
    body = bytearray(newest.read_bytes())
    body[len(body) // 2] ^= 0xFF
    newest.write_bytes(bytes(body))
    with pytest.warns(CheckpointWarning, match=r"checkpoint-000003: rank-0.npz is corrupted"):
        resumed = SparseSGDClassifier(**common, resume=True).fit(X, y)
    assert digest(resumed) == digest(never)


def test_checkpoint_options_are_checked(data, tmp_path):
    X, y = data
    with pytest.raises(ValueError, match="'resume' parameter .* needs a 'checkpoint'"):
        SparseSGDClassifier(resume=True).fit(X, y)
    with pytest.raises(ValueError, match="'checkpoint_seconds' parameter .* needs a 'check"):
        SparseSGDClassifier(checkpoint_seconds=5).fit(X, y)
    with pytest.raises(ValueError, match="checkpoint should be None with partial_fit"):
        SparseSGDClassifier(checkpoint=tmp_path).partial_fit(X, y, classes=[-1, 1])


# -- several ranks: SPMD under mpiexec, and Dask ---------------------------------------


def fit_resumed(script, nprocs, folder, mode, *args):
    """Run ``script`` in ``mode``; its last line (rank 0's, or the client's) as JSON."""
    result = run_mpi(script, nprocs, folder, mode, *args, timeout=240, check=mode != "killed")
    if mode == "killed":
        assert result.returncode != 0 and "Killed (signal 9)" in result.launcher, result.report()
        return None
    return json.loads(result.stdout[0 if script == "fit_resumed.py" else 1].splitlines()[-1])


@pytest.mark.parametrize(
    "seconds",
    [pytest.param("none", marks=pytest.mark.bench), "0.000001"],
    ids=["after-epochs", "within-epochs"],
)
def test_ranks_killed_in_epoch_3_resume_to_the_same_model(tmp_path, seconds):
    fit_resumed("fit_resumed.py", 2, tmp_path / "run", "killed", seconds)
    resumed = fit_resumed("fit_resumed.py", 2, tmp_path / "run", "resume", seconds)
    assert resumed["resumed_from"]["epochs"] == 2
    assert (resumed["resumed_from"]["step"] > 0) == (seconds != "none")
    assert resumed["digest"] == resumed["never"] and resumed["n_iter"] == 5
    # on another number of ranks the checkpoint is refused
    other = run_mpi("fit_resumed.py", 3, tmp_path / "run", "resume", seconds, check=False)
    assert "cannot resume from" in other.stdout[0] + other.stderr[0], other.report()
    assert "written by 2 ranks, this run has 3" in other.stdout[0] + other.stderr[0]


def test_dask_workers_killed_in_epoch_3_resume_to_the_same_model(tmp_path):
    fit_resumed("cluster_resumed.py", 4, tmp_path / "run", "killed")
    resumed = fit_resumed("cluster_resumed.py", 4, tmp_path / "run", "resume")
    assert resumed["digest"] == resumed["never"] and resumed["n_iter"] == 5


def test_sparcml_train_checkpoints_and_resumes(tmp_path):
    def train(*options, epochs):
        command = [sys.executable, "-m", "sparcml_apps.cli.main", "train", "--rows", "2000"]
        command += ["--features", "5000", "--epochs", str(epochs), *options]
        command += ["--model", str(tmp_path / "m.joblib"), "--metrics", str(tmp_path / "m.json")]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        metrics = json.loads((tmp_path / "m.json").read_text())
        return done.stdout, metrics, joblib.load(tmp_path / "m.joblib")

    saving = ["--checkpoint", str(tmp_path / "c"), "--resume"]
    out, metrics, _ = train(*saving, epochs=2)  # nothing to resume from: starts afresh
    assert "resumed" not in out and metrics["resumed_from"] is None
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "checkpoint-000001",
        "checkpoint-000002",
    ]
    out, metrics, resumed = train(*saving, epochs=3)
    folder = tmp_path / "c" / "checkpoint-000002"
    assert f"resumed from {folder} (2 epochs finished before it)" in out
    assert metrics["resumed_from"] == str(folder) and metrics["epochs"] == 3
    assert len(metrics["per_epoch"]) == 1
    *_, never = train(epochs=3)
    assert digest(resumed) == digest(never)
