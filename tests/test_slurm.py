"""deploy/slurm under a real Slurm: the cluster of this one machine that
deploy/slurm/local-cluster.sh starts (as root; it installs Debian's packages when missing)
runs deploy/slurm/train.sbatch. Skipped, with the reason, where Slurm cannot be started."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from mpirun import MPI_ENV

from sparcml_apps.cli.main import build_parser
from sparcml_apps.cli.train import sources

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "deploy" / "slurm"
BIN = Path(sys.executable).parent
# one node of 2 CPUs: the job asks for what it has
ONE_NODE = ["--nodes=1", "--ntasks=2", "--mem-per-cpu=1G", "--time=5"]
pytestmark = pytest.mark.usefixtures("compiled_kernels")


@pytest.fixture(scope="module")
def slurm_env():
    """The environment in which sbatch and scontrol reach the local cluster; the cluster
    is started for these tests (and stopped after them) unless it is running already."""
    if os.geteuid() != 0:
        pytest.skip("starting Slurm's daemons (slurmctld, slurmd, munged) needs root")
    if not (BIN / "activate").is_file():
        pytest.skip(f"the tests do not run in a venv ({BIN} has no activate) for the job")
    script = str(SLURM / "local-cluster.sh")
    started = subprocess.run([script, "status"], capture_output=True).returncode != 0
    if started:
        result = subprocess.run([script, "start"], capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            subprocess.run([script, "stop"], capture_output=True, timeout=120)
            pytest.skip(f"Slurm could not be started here: {result.stderr.strip()}")
        export = result.stdout.strip()
    else:
        export = subprocess.run([script, "start"], capture_output=True, text=True).stdout.strip()
    variable, _, conf = export.removeprefix("export ").partition("=")
    assert variable == "SLURM_CONF", export
    env = {**os.environ, **MPI_ENV, "SLURM_CONF": conf, "SPARCML_VENV": str(BIN.parent)}
    yield env
    if started:
        subprocess.run([script, "stop"], capture_output=True, timeout=120, check=True)


def submit(env, directory, *sbatch_args, timeout=180):
    """Submit and wait (sbatch --wait); the job id and sbatch's exit code (the job's).
    A job still running at ``timeout`` is cancelled and the test fails."""
    process = subprocess.Popen(
        ["sbatch", "--wait", "--parsable", f"--chdir={directory}", *map(str, sbatch_args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    job = process.stdout.readline().strip()
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", job], env=env, check=False)
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(
            f"job {job} did not end in {timeout} s: {show_job(env, job)}"
        ) from None
    assert job.isdigit(), f"sbatch did not submit: {job} {stderr}"
    return job, process.returncode


def show_job(env, job):
    """``scontrol show job``'s fields, as a dict."""
    text = subprocess.run(
        ["scontrol", "show", "job", "--oneliner", job],
        capture_output=True, text=True, env=env, check=True,
    ).stdout  # fmt: skip
    return dict(field.split("=", 1) for field in text.split() if "=" in field)


def assert_same_as_two_local_ranks(env, tmp_path, model, options):
    """``sparcml train --ranks 2 OPTIONS`` here gives ``model``, bit for bit."""
    local = subprocess.run(
        [BIN / "sparcml", "train", "--ranks", "2", *options, "--model",
         tmp_path / "local.joblib", "--metrics", tmp_path / "local.json"],
        capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert local.returncode == 0, local.stdout + local.stderr
    reference = joblib.load(tmp_path / "local.joblib")
    assert model.coef_.tobytes() == reference.coef_.tobytes()
    assert model.intercept_.tobytes() == reference.intercept_.tobytes()


def rows(source):
    """The rows of ``source`` that two ranks load, in rank order."""
    shares = [source.load(rank, 2) for rank in range(2)]
    return sp.vstack([X for X, _ in shares], format="csr"), np.concatenate([y for _, y in shares])


LONG = ["--rows", "40000", "--features", "200000", "--nnz-per-row", "40", "--epochs", "40"]


def test_a_requeued_job_resumes_from_its_checkpoint(slurm_env, tmp_path):
    """train.sbatch trains on two ranks; ``scontrol requeue`` while it trains: the job gets
    SIGTERM, goes back to the queue, starts again (same job id) within seconds and resumes
    from the newest complete checkpoint in its folder, to the model of a run never
    stopped."""
    job = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={tmp_path}", *ONE_NODE, SLURM / "train.sbatch",
         *LONG],
        capture_output=True, text=True, env=slurm_env, check=True,
    ).stdout.strip()  # fmt: skip
    folder = f"sparcml-checkpoints-{job}"  # in the job's folder, tmp_path
    try:
        wait_for(lambda: list((tmp_path / folder).glob("checkpoint-*/COMPLETE")), 120)
        subprocess.run(["scontrol", "requeue", job], env=slurm_env, check=True)
        requeued = time.monotonic()
        wait_for(lambda: show_job(slurm_env, job)["Restarts"] == "1", 60)
        wait_for(lambda: show_job(slurm_env, job)["JobState"] == "RUNNING", 60)
        restarted = time.monotonic() - requeued
        wait_for(lambda: show_job(slurm_env, job)["JobState"] == "COMPLETED", 180)
    finally:
        subprocess.run(["scancel", job], env=slurm_env, check=False)
    log = (tmp_path / f"sparcml-train-{job}.out").read_text()
    assert "DUE TO JOB REQUEUE ***" in log, log
    done = re.search(rf"resumed from {folder}/checkpoint-\d+ \((\d+) epochs finished", log)
    assert done and 1 <= int(done[1]) < 40, log
    assert restarted < 30
    assert show_job(slurm_env, job)["JobState"] == "COMPLETED"
    assert "on 2 MPI rank(s)" in log and "Traceback" not in log
    metrics = json.loads((tmp_path / f"sparcml-metrics-{job}.json").read_text())
    assert metrics["mode"] == "mpi" and metrics["ranks"] == 2
    assert metrics["epochs"] == 40 and metrics["resumed_from"].startswith(folder)
    # a rank's rows touch most columns in an epoch here: the exchanges are about dense
    assert 0.5 * metrics["dense_bytes"] < metrics["bytes_sent"] < 1.01 * metrics["dense_bytes"]
    # the same model, bit for bit, as two local ranks never stopped
    model = joblib.load(tmp_path / f"sparcml-model-{job}.joblib")
    assert_same_as_two_local_ranks(slurm_env, tmp_path, model, LONG)
    # the accuracy reported is the saved model's on the rows the two ranks held out
    _, test = sources(build_parser().parse_args(["train", *LONG]))
    X_test, y_test = rows(test)
    assert metrics["test_accuracy"] == pytest.approx(model.score(X_test, y_test), abs=1e-12)
    assert metrics["test_accuracy"] > 0.7


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not reached in {seconds} s"
        time.sleep(0.2)
