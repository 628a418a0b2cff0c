"""sparcml train: local ranks, mpiexec, Dask, the saved outputs and malformed data."""

import json
import os
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
from mpirun import MPI_ENV, run_mpi
from testdata import LIBSVM, needs_a9a

from sparcml_apps.cli.main import main
from sparcml_apps.train import Source

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SMALL = ["--rows", "6000", "--features", "50000", "--nnz-per-row", "40", "--epochs", "2"]
pytestmark = pytest.mark.usefixtures("compiled_kernels")


def outputs(directory):
    return ["--model", str(directory / "model.joblib"), "--metrics", str(directory / "m.json")]


def load(directory):
    model = joblib.load(directory / "model.joblib")
    return model, json.loads((directory / "m.json").read_text())


def test_ranks_and_mpiexec_give_the_same_model(tmp_path):
    environment = {**os.environ, **MPI_ENV, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    arguments = [*SMALL, "--random-state", "3"]
    local = subprocess.run(
        [BIN / "sparcml", "train", "--ranks", "2", *arguments, *outputs(tmp_path / "a")],
        capture_output=True, text=True, timeout=120, env=environment,
    )  # fmt: skip
    assert local.returncode == 0, local.stdout + local.stderr
    # the local recipe: mpiexec -n $RANKS sparcml train ...
    launched = subprocess.run(
        [ROOT / "deploy" / "local" / "train.sh", *arguments, *outputs(tmp_path / "b")],
        capture_output=True, text=True, timeout=120, env={**environment, "RANKS": "2"},
    )  # fmt: skip
    assert launched.returncode == 0, launched.stdout + launched.stderr
    (first, metrics), (second, _) = load(tmp_path / "a"), load(tmp_path / "b")
    assert first.coef_.tobytes() == second.coef_.tobytes()
    assert first.intercept_.tobytes() == second.intercept_.tobytes()
    # the table: a header, one row an epoch, the summary
    lines = local.stdout.splitlines()
    assert lines[1].split() == ["epoch", "loss", "test_accuracy", "seconds", "sent_MB"] + [
        "dense_MB",
        "saved",
    ]
    assert [line.split()[0] for line in lines[2:4]] == ["1", "2"]
    assert lines[4].startswith(f"test accuracy {metrics['test_accuracy']:.4f} | fit ")
    # the accuracy reported is the saved model's on the rows each rank held out
    held = Source(rows=6000, features=50000, nnz_per_row=40, holdout=0.2, part="test")
    shares = [held.load(rank, 2) for rank in range(2)]
    X = np.concatenate([share[0].toarray() for share in shares])
    y = np.concatenate([share[1] for share in shares])
    assert metrics["test_accuracy"] == pytest.approx(first.score(X, y), abs=1e-12)
    assert metrics["mode"] == "mpi" and metrics["ranks"] == 2 and metrics["epochs"] == 2
    assert 0 < metrics["bytes_sent"] < metrics["dense_bytes"]
    assert metrics["params"]["random_state"] == 3


def broken_copy(tmp_path, line):
    """The first 4000 lines of a9a with line ``line`` (0-based) malformed; the file and
    the number of that line within the second half of the bytes (1-based)."""
    lines = (LIBSVM / "a9a").read_text().splitlines(keepends=True)[:4000]
    lines[line] = "+1 3:1 bad 7:1\n"
    path = tmp_path / "broken"
    path.write_text("".join(lines))
    starts = np.cumsum([0] + [len(text) for text in lines])
    first = int(np.searchsorted(starts, starts[-1] // 2))  # the first line of rank 1 of 2
    return path, line - first + 1


@needs_a9a
def test_a_malformed_shard_fails_every_rank(tmp_path):
    broken, line = broken_copy(tmp_path, 3000)  # in the bytes of rank 1 of 2
    arguments = ["train", "--dataset", broken, "--n-features", "123", *outputs(tmp_path)]
    result = run_mpi("sparcml_cli.py", 2, *arguments, timeout=60, check=False, abort_on_error=False)
    assert result.returncode != 0
    culprit = f"ParseError: {broken} (bytes "
    assert result.stderr[1].startswith(f"sparcml train: error: {culprit}"), result.report()
    assert f"line {line}: expected index:value, got 'bad'" in result.stderr[1]
    assert result.stderr[0].startswith(f"sparcml train: error: RankError: rank 1 failed: {culprit}")
    assert "Traceback" not in result.report()
    assert not (tmp_path / "model.joblib").exists()


def test_dask_in_one_mpiexec_job(tmp_path):
    result = run_mpi("sparcml_cli.py", 4, "train", "--dask", *SMALL, *outputs(tmp_path))
    for text in [result.launcher, *result.stdout, *result.stderr]:
        assert "Traceback" not in text and " - ERROR - " not in text, result.report()
    model, metrics = load(tmp_path)
    assert metrics["mode"] == "dask" and metrics["ranks"] == 2
    assert [row["epoch"] for row in metrics["per_epoch"]] == [1, 2]
    # the test rows of the two workers, whichever chunks they trained on
    held = Source(rows=6000, features=50000, nnz_per_row=40, holdout=0.2, part="test")
    shares = [held.load(rank, 2) for rank in range(2)]
    X = np.concatenate([share[0].toarray() for share in shares])
    y = np.concatenate([share[1] for share in shares])
    assert metrics["test_accuracy"] == pytest.approx(model.score(X, y), abs=1e-12)
    assert "test accuracy" in result.stdout[1]


@needs_a9a
def test_dask_reports_a_malformed_chunk_and_the_job_ends(tmp_path):
    broken, _ = broken_copy(tmp_path, 3000)
    arguments = ["train", "--dask", "--dataset", broken, "--n-features", "123"]
    result = run_mpi(
        "sparcml_cli.py", 4, *arguments, *outputs(tmp_path), check=False, abort_on_error=False
    )
    assert result.returncode == 1
    assert result.stderr[1].startswith(f"sparcml train: error: ParseError: {broken} (bytes ")


def test_command_line_errors(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--scheduler-file", "x.json"])
    assert "--scheduler-file goes with --dask" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--ranks", "2", "--dask"])
    assert "--ranks takes a positive count, and not with --dask" in capsys.readouterr().err
    # an abbreviation of --ranks would survive into the ranks' command line
    with pytest.raises(SystemExit):
        main(["train", "--rank", "2"])
    assert "unrecognized arguments: --rank 2" in capsys.readouterr().err


def test_bench_goes_to_the_benchmarks(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["bench", "--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m sparcml_apps.bench") and "allreduce" in out
