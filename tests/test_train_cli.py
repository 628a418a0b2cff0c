"""sparcml train: local ranks, mpiexec, Dask, the saved outputs and malformed data."""

import bz2
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
from mpirun import MPI_ENV, run_mpi
from testdata import LIBSVM, needs_a9a

from sparcml_apps.bench import BENCHMARKS
from sparcml_apps.cli.main import build_parser, main
from sparcml_apps.cli.train import Source, _traffic, print_row, versus

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
        "vs_dense",
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
    # both ranks, one exchange an epoch of all 50,000 weights and the intercept, dense,
    # as float32
    assert 0 < metrics["bytes_sent"] and metrics["dense_bytes"] == 2 * (1 + 1) * 50_001 * 4
    assert metrics["params"]["random_state"] == 3
    # each rank's peak memory: at least an interpreter with numpy, scipy and numba
    assert len(metrics["peak_rss_bytes"]) == 2
    assert all(50e6 < peak < 4e9 for peak in metrics["peak_rss_bytes"])


def broken_copy(tmp_path, line):
    """The first 4000 lines of a9a with line ``line`` (0-based) malformed, in the bytes of
    rank 1 of 2; the file and the number of that line in the file (1-based)."""
    lines = (LIBSVM / "a9a").read_text().splitlines(keepends=True)[:4000]
    lines[line] = "+1 3:1 bad 7:1\n"
    path = tmp_path / "broken"
    path.write_text("".join(lines))
    starts = np.cumsum([0] + [len(text) for text in lines])
    assert starts[line] > starts[-1] // 2  # the second half of the bytes
    return path, line + 1


@needs_a9a
def test_a_malformed_shard_fails_every_rank(tmp_path):
    broken, line = broken_copy(tmp_path, 3000)  # in the bytes of rank 1 of 2
    arguments = ["train", "--dataset", broken, "--n-features", "123", *outputs(tmp_path)]
    result = run_mpi("sparcml_cli.py", 2, *arguments, timeout=60, check=False, abort_on_error=False)
    assert result.returncode != 0
    culprit = f"ParseError: {broken}, line {line}: expected index:value, got 'bad'"
    assert result.stderr[1].startswith(f"sparcml train: error: {culprit}"), result.report()
    assert result.stderr[0].startswith(f"sparcml train: error: RankError: rank 1 failed: {culprit}")
    assert "Traceback" not in result.report()
    assert not (tmp_path / "model.joblib").exists()


def test_dask_in_one_mpiexec_job(tmp_path):
    result = run_mpi("sparcml_cli.py", 4, "train", "--dask", *SMALL, *outputs(tmp_path))
    for text in [result.launcher, *result.stdout, *result.stderr]:
        assert "Traceback" not in text and " - ERROR - " not in text, result.report()
    model, metrics = load(tmp_path)
    assert metrics["mode"] == "dask" and metrics["ranks"] == 2
    assert len(metrics["peak_rss_bytes"]) == 2  # a worker's each
    assert [row["epoch"] for row in metrics["per_epoch"]] == [1, 2]
    # the test rows of the two workers, whichever chunks they trained on
    held = Source(rows=6000, features=50000, nnz_per_row=40, holdout=0.2, part="test")
    shares = [held.load(rank, 2) for rank in range(2)]
    X = np.concatenate([share[0].toarray() for share in shares])
    y = np.concatenate([share[1] for share in shares])
    assert metrics["test_accuracy"] == pytest.approx(model.score(X, y), abs=1e-12)
    assert "test accuracy" in result.stdout[1]


def test_a_rank_slower_to_set_up_does_not_count_in_the_training_seconds(tmp_path):
    # the ranks meet after the rows load, and the fit's clock starts there
    result = run_mpi("cli_slow_setup.py", 2, "3", "train", *SMALL, *outputs(tmp_path), timeout=120)
    assert "Traceback" not in result.report()
    _, metrics = load(tmp_path)
    assert metrics["train_seconds"] < 2, result.report()  # not the 3 s rank 1 took longer


@needs_a9a
def test_dask_reports_a_malformed_chunk_and_the_job_ends(tmp_path):
    broken, line = broken_copy(tmp_path, 3000)
    arguments = ["train", "--dask", "--dataset", broken, "--n-features", "123"]
    result = run_mpi(
        "sparcml_cli.py", 4, *arguments, *outputs(tmp_path), check=False, abort_on_error=False
    )
    assert result.returncode == 1
    assert result.stderr[1].startswith(f"sparcml train: error: ParseError: {broken}, line {line}:")


A9A_FILE = ["--dataset", str(LIBSVM / "a9a"), "--n-features", "123"]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (["--epochs", "0"], "--epochs must be at least 1; got 0"),
        (["--alpha", "-1"], "--alpha must be a finite number >= 0; got -1.0"),
        (["--alpha", "nan"], "--alpha must be a finite number >= 0; got nan"),
        (["--batch-size", "0"], "--batch-size must be at least 1; got 0"),
        (["--topk", "0"], "--topk must be a fraction in (0, 1] or a count >= 1; got 0.0"),
        (["--topk", "1.5"], "--topk must be a fraction in (0, 1] or a count >= 1; got 1.5"),
        (["--topk", "many"], "argument --topk: expected a fraction or a count; got 'many'"),
        (["--test-fraction", "1.5"], "--test-fraction must be in [0, 1); got 1.5"),
        (["--test-fraction", "1"], "--test-fraction must be in [0, 1); got 1.0"),
        (["--ranks", "0"], "--ranks must be at least 1; got 0"),
        (["--rows", "0"], "--rows must be at least 1; got 0"),
        (["--random-state", "-1"], "--random-state must be at least 0; got -1"),
        (["--data-seed", str(2**32)], f"--data-seed must be below 2**32; got {2**32}"),
        (["--ranks", "2", "--dask"], "--ranks does not go with --dask: start Dask with"),
        (["--scheduler-file", "x.json"], "--scheduler-file goes with --dask"),
        (["--shutdown"], "--shutdown goes with --scheduler-file"),
        (["--model", "/proc/model.joblib"], "--model /proc/model.joblib: cannot write in /proc"),
        (["--metrics", "/proc/m.json"], "--metrics /proc/m.json: cannot write in /proc"),
        (["--metrics", "README.md/m.json"], "--metrics README.md/m.json: README.md is not a"),
        (["--model", "/tmp"], "--model /tmp: expected a file name; it is a directory"),
        (["--model", "same", "--metrics", "./same"], "--model and --metrics must be different"),
        (["--dataset", "no-such-set"], "--dataset no-such-set: no such file or directory, and"),
        (["--test", "no-such-set"], "--test no-such-set: no such file or directory, and no"),
        (["--dataset", str(LIBSVM / "a9a")], "--n-features is required with the file"),
        (["--dataset", str(ROOT)], f"--dataset {ROOT}: expected a CSR cache directory; it"),
        (["--data-home", str(ROOT / "README.md")], "--data-home must be a directory; got the"),
    ],
)
def test_options_are_checked_before_any_work(capsys, monkeypatch, arguments, error):
    """Each bad option fails at once, named as on the command line, with the usage of
    `sparcml train`: no rank is started and no data read."""

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    from sparcml_apps import _mpiexec
    from sparcml_apps.cli import train

    for module, function in ((train, "run_spmd"), (train, "run_dask"), (_mpiexec, "run")):
        monkeypatch.setattr(module, function, no_work)
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as caught:
        main(["train", *arguments])
    err = capsys.readouterr().err
    assert caught.value.code == 2
    assert err.startswith("usage: sparcml train ") and f"sparcml train: error: {error}" in err


def test_a_compressed_file_is_refused_before_any_work(capsys, tmp_path):
    packed = tmp_path / "a9a.bz2"
    packed.write_bytes(bz2.compress(b"+1 1:1\n"))
    with pytest.raises(SystemExit):
        main(["train", "--dataset", str(packed), "--n-features", "123"])
    err = capsys.readouterr().err
    assert f"--dataset {packed}: bz2-compressed data cannot be shared out by bytes" in err


def test_an_abbreviation_of_ranks_is_refused(capsys):
    # it would survive into the ranks' command line, and every rank would start ranks
    with pytest.raises(SystemExit):
        main(["train", "--rank", "2"])
    assert "unrecognized arguments: --rank 2" in capsys.readouterr().err


def test_help_states_each_default_once(capsys):
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    stated = [a for a in train._actions if a.option_strings and a.dest not in ("help",)]
    assert len(stated) > 20
    for action in stated:
        assert action.help.count("(default:") == 1, action.option_strings
    with pytest.raises(SystemExit) as caught:
        main(["train", "--help"])
    assert caught.value.code == 0
    assert " ".join(capsys.readouterr().out.split()).count("(default:") == len(stated)


def test_the_table_and_summary_of_traffic():
    out = io.StringIO()
    row = {"epoch": 1, "loss": 0.5, "test_accuracy": 0.8, "seconds": 1.0}
    print_row({**row, "bytes_sent": 0, "dense_bytes": 0}, file=out)  # one rank
    print_row({**row, "bytes_sent": 4_400_000, "dense_bytes": 4_000_000}, file=out)
    print_row({**row, "bytes_sent": 1_000_000, "dense_bytes": 142_800_000}, file=out)
    print_row({**row, "bytes_sent": 77_570_460, "dense_bytes": 77_566_400}, file=out)
    cells = [line[-13:].strip() for line in out.getvalue().splitlines()]
    assert cells == ["-", "1.1x more", "143x less", "0.0052% more"]
    assert _traffic(0, 0) == "nothing sent (one rank: no exchange)"
    assert _traffic(4_400_000, 4_000_000) == (
        "sent 4.4 MB, 1.1x more than a dense allreduce of the same exchanges (4.0 MB)"
    )
    # more sent than a dense allreduce never reads "less", however close
    assert _traffic(387_852_300, 387_832_000) == (
        "sent 387.9 MB, 0.0052% more than a dense allreduce of the same exchanges (387.8 MB)"
    )
    assert _traffic(4_000_000, 5_000_000).startswith("sent 4.0 MB, 1.2x less than")
    assert _traffic(1_000_000, 142_800_000).startswith("sent 1.0 MB, 143x less than")
    assert _traffic(5_000_000, 5_000_000).startswith("sent 5.0 MB, as much as a dense")
    assert versus(2_000_000, 1_000_000) == "2.0x more" and versus(1, 1_000_000) == "1000000x less"


def test_one_rank_reports_no_traffic(tmp_path):
    arguments = ["--rows", "2000", "--features", "5000", "--nnz-per-row", "10", "--epochs", "1"]
    done = subprocess.run(
        [BIN / "sparcml", "train", *arguments, *outputs(tmp_path)],
        capture_output=True, text=True, timeout=120, env={**os.environ, **MPI_ENV},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[2].split()[0] == "1" and lines[2].split()[-1] == "-"
    assert lines[3].endswith("| nothing sent (one rank: no exchange)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "model.joblib"]


def _left_files():
    """What ``mpiexec`` (its hardware map in /tmp) and MPICH (its shared memory) leave where
    a job ends before its time."""
    return {*Path("/tmp").glob("hydra_hwloc_xmlfile_*"), *Path("/dev/shm").glob("mpich_shm_*")}


@pytest.mark.parametrize(
    ("sent", "code", "said"),
    [
        (signal.SIGINT, 130, "interrupted; no model or metrics written"),
        (signal.SIGTERM, 143, "ended by SIGTERM; the ranks were stopped, no model or metrics "
         "written"),
    ],
    ids=["ctrl-c", "sigterm"],
)  # fmt: skip
def test_a_signal_ends_local_ranks_quietly(tmp_path, sent, code, said):
    # the ranks run in a session of their own: a signal to this process must stop them
    psutil = pytest.importorskip("psutil")
    arguments = ["--rows", "100000", "--features", "500000", "--epochs", "50"]
    before = _left_files()
    process = subprocess.Popen(
        [BIN / "sparcml", "train", "--ranks", "2", *arguments, *outputs(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **MPI_ENV},
    )  # fmt: skip
    try:
        assert "sparcml train:" in process.stdout.readline()  # the ranks are at work
        ranks = psutil.Process(process.pid).children(recursive=True)
        assert len([p for p in ranks if "python" in p.name()]) >= 2
        process.send_signal(sent)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == code
    assert stderr == f"sparcml train: {said}\n"
    _, alive = psutil.wait_procs(ranks, timeout=30)
    assert alive == []
    assert list(tmp_path.iterdir()) == []
    assert _left_files() <= before


def test_bench_goes_to_the_benchmarks(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["bench", "--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sparcml bench") and "allreduce" in out


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_benchmark_has_help(capsys, name):
    with pytest.raises(SystemExit) as exit:
        main(["bench", name, "--help"])
    assert exit.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: sparcml bench {name} ")
