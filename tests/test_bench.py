"""Every benchmark runs in ``--quick`` mode and writes what it says it writes (the slower
ones in ``make bench``, with ``pytest -m bench``)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file
from sklearn.linear_model import SGDClassifier
from testdata import LIBSVM, needs_a9a

from collectives import ALGORITHMS, cost_model
from sparcml_apps import SparseSGDClassifier
from sparcml_apps.backends.pool import row_blocks
from sparcml_apps.bench import BENCHMARKS
from sparcml_apps.bench._peer_systems import SYSTEMS
from sparcml_apps.bench.n_jobs import STAGES
from sparcml_apps.cli.main import build_parser
from sparcml_apps.cli.train import estimator
from sparcml_apps.datasets import GENERATORS, load_cache, make_url_like

pytest.importorskip("matplotlib", reason="the plots need the bench extra")
TIMEOUT = 600


def quick(name, out, *options):
    """Run ``python -m sparcml_apps.bench NAME --quick``; its output."""
    done = subprocess.run(
        [sys.executable, "-m", "sparcml_apps.bench", name, "--quick", "--out", out, *options],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def records(out, name):
    assert "|---|" in (out / f"{name}.md").read_text()
    return json.loads((out / f"{name}.json").read_text())


def test_every_benchmark_is_tested_here():
    tested = {
        "allreduce", "train", "throughput", "overlap", "projection", "diagnostics", "jobs",
        "peers", "scaling", "fullsize", "stopping",
    }  # fmt: skip
    assert set(BENCHMARKS) == tested | {"parse", "calibrate"}  # those two: below and apart


def test_allreduce(tmp_path):
    quick("allreduce", tmp_path)
    found = records(tmp_path, "allreduce")
    assert {r["algorithm"] for r in found} == {"mpi_allreduce", *ALGORITHMS, "auto"}
    assert all(r["best_seconds"] > 0 for r in found)
    assert (tmp_path / "allreduce.png").stat().st_size > 10_000


@pytest.mark.bench  # the sums it times: test_collectives_mpi, test_training_mpi
def test_train(tmp_path):
    quick("train", tmp_path)
    found = records(tmp_path, "train")
    one = {r["method"]: r for r in found if r["nprocs"] == 1}
    two = {r["method"]: r for r in found if r["nprocs"] == 2}
    assert "scikit-learn SGDClassifier" in one and "dense allreduce" not in one
    assert "scikit-learn SGDClassifier" not in two and len(two) == 10
    exact = two["exact, auto"]["epochs"]
    # every exact algorithm and the dense allreduce sum the same steps: the same curves
    for name in ("exact, ssar_split_allgather", "dense allreduce"):
        for a, b in zip(exact, two[name]["epochs"], strict=True):
            assert a["accuracy"] == pytest.approx(b["accuracy"], abs=2e-3)
    sent = {name: r["epochs"][-1]["bytes_sent"] for name, r in two.items()}
    assert sent["TopK 0.1%, EF"] < sent["exact, auto"] < sent["dense allreduce"]
    target = found[0]["target"]
    assert target == pytest.approx(max(r["epochs"][-1]["accuracy"] for r in found) - 0.01)
    assert all(r["time_to_target"] is None or r["time_to_target"] > 0 for r in found)
    assert (tmp_path / "train-url-like-P2-shm.png").stat().st_size > 10_000


@pytest.mark.bench  # a timing of paths test_estimators_mpi covers
def test_throughput(tmp_path):
    quick("throughput", tmp_path)
    runs = [r["run"] for r in records(tmp_path, "throughput")]
    assert runs[0] == "scikit-learn SGDClassifier" and "SparseSGDClassifier, mpiexec" in runs


@pytest.mark.bench  # a timing of paths test_estimators_mpi covers
def test_overlap(tmp_path):
    quick("overlap", tmp_path)
    found = records(tmp_path, "overlap")
    assert [(r["options"]["overlap"], r["options"]["quantization_bits"]) for r in found] == [
        (False, None), (False, 4), (True, None), (True, 4)
    ]  # fmt: skip
    exact, quantized = found[0]["epochs"][-1], found[1]["epochs"][-1]
    assert quantized["bytes_sent"] < 0.6 * exact["bytes_sent"]


@pytest.mark.bench  # its parts: test_time_to_target, test_cost_model
def test_projection(tmp_path):
    quick("projection", tmp_path)
    found = records(tmp_path, "projection")
    assert max(r["nprocs"] for r in found) == 1024
    assert (tmp_path / "projection.png").stat().st_size > 10_000
    target = json.loads((tmp_path / "projection-target.json").read_text())
    assert {(r["shape"], r["nprocs"]) for r in target["records"]} == {
        (shape, 1 << i) for shape in ("url", "webspam-trigram", "kdd2012") for i in range(11)
    }
    assert target["checks"] == []  # no scaling benchmark in that folder
    assert (tmp_path / "projection-target.png").stat().st_size > 10_000


@pytest.mark.bench  # gamma and xi: test_diagnostics_mpi
def test_diagnostics(tmp_path):
    quick("diagnostics", tmp_path)
    found = records(tmp_path, "diagnostics")
    for r in found:
        assert len(r["gamma"]) == len(r["xi"]) > 10
        assert all(0 <= g < 1 for g in r["gamma"]) and all(x >= 0 for x in r["xi"])
    # a larger K leaves less behind
    medians = [sorted(r["gamma"])[len(r["gamma"]) // 2] for r in found]
    assert medians == sorted(medians, reverse=True)
    assert (tmp_path / "diagnostics.png").stat().st_size > 10_000


def test_jobs(tmp_path):
    quick("jobs", tmp_path)
    found = records(tmp_path, "jobs")
    found, searched = found[:4], found[4:]
    ways = [(r["way"], r["n_jobs"]) for r in found]
    assert ways == [("in-process", None), ("n_jobs=1", 1), ("first fit", 2), ("second fit", 2)]
    # the grid search: 2 candidates x 3 folds, each fit on two thirds of the rows
    assert [(r["way"], r["fit"], r["rows"]) for r in searched] == [
        ("grid search", i, 20_000 * 2 // 3) for i in range(1, 7)
    ]
    # the in-process fit of the same rows and seed, here
    X, y = make_url_like(25_000, random_state=0)
    model = SparseSGDClassifier(random_state=0).fit(X[:20_000], y[:20_000])
    expected = (model.n_iter_, model.score(X[20_000:], y[20_000:]))
    assert [(r["epochs"], r["accuracy"]) for r in found[:2]] == [expected] * 2
    # a kept pool fits what a new one fits; each fit's stages come in order
    assert found[2]["accuracy"] == found[3]["accuracy"] and found[2]["epochs"] > 0
    for r in found[2:] + searched:
        stages = list(r["stages"].values())
        assert list(r["stages"]) == list(STAGES) and 0 < stages[0] and stages == sorted(stages)
        assert r["stages"]["total"] <= r["seconds"]
    assert all(r["seconds"] > 0 and r["load"] >= 0 for r in found)


def test_scaling(tmp_path):
    quick("scaling", tmp_path, "--datasets", "url-like-dense")
    found = json.loads((tmp_path / "scaling.json").read_text())
    runs = {(r["system"], r["nprocs"], r["seed"]): r for r in found["records"]}
    assert set(runs) == {(s, p, seed) for s, p in CELLS for seed in (0, 1)}
    # in rounds: every cell's seed 0 before any seed 1
    assert [r["seed"] for r in found["records"]] == [0] * len(CELLS) + [1] * len(CELLS)
    for r in found["records"]:  # stolen CPU time: a share, the same for a run's systems
        assert r["steal"] is None or 0 <= r["steal"] <= 1
        run = "alone" if r["system"] == "alone" else "sparcml"
        assert r["steal"] == runs[run, r["nprocs"], r["seed"]]["steal"]
    # the benchmark's one-rank curve is the in-process fit of the same rows, epoch by epoch
    X, y = make_url_like(15_000, 100_000, random_state=0, **GENERATORS["url-like-dense"])
    X, y, Xt, yt = X[:12_000], y[:12_000], X[12_000:], y[12_000:]
    for epochs in (1, 3):
        model = SparseSGDClassifier(loss="log_loss", max_iter=epochs, tol=None, random_state=1)
        model.fit(X, y)
        assert runs["sparcml", 1, 1]["points"][epochs - 1]["accuracy"] == model.score(Xt, yt)
    model = SparseSGDClassifier(loss="log_loss", random_state=1).fit(X, y)
    assert runs["sparcml", 1, 1]["defaults"]["accuracy"] == model.score(Xt, yt)
    # alone: each rank's model is the in-process fit of its block of rows alone
    train, test = row_blocks(12_000, 2), row_blocks(3_000, 2)
    for epochs in (1, 3):
        correct = 0
        for rank in (0, 1):
            rows, rows_test = slice(*train[rank : rank + 2]), slice(*test[rank : rank + 2])
            model = SparseSGDClassifier(loss="log_loss", max_iter=epochs, tol=None, random_state=0)
            model.fit(X[rows], y[rows])
            correct += np.sum(model.predict(Xt[rows_test]) == yt[rows_test])
        assert runs["alone", 2, 0]["points"][epochs - 1]["accuracy"] == correct / 3_000
    seconds = [p["seconds"] for p in runs["alone", 2, 0]["points"]]
    assert 0 < seconds[0] and seconds == sorted(seconds) and "defaults" not in runs["alone", 2, 0]
    sklearn = SGDClassifier(loss="log_loss", random_state=np.random.RandomState(0))
    for point in runs["scikit-learn", 1, 0]["points"]:
        sklearn.partial_fit(X, y, classes=[-1.0, 1.0])
        assert point["accuracy"] == sklearn.score(Xt, yt)
    summary = {(s["system"], s["nprocs"]): s for s in found["summary"]}
    one = summary["sparcml", 1]
    target = np.mean([runs["sparcml", 1, s]["points"][1]["accuracy"] for s in (0, 1)]) - 0.003
    assert one["target"] == pytest.approx(target)
    for (system, nprocs), s in summary.items():
        mine = [runs[system, nprocs, seed]["points"] for seed in (0, 1)]
        reached = [next((p["seconds"] for p in c if p["accuracy"] >= target), None) for c in mine]
        expected = None if None in reached else pytest.approx(np.mean(reached))
        assert s["time_to_target"] == expected
        median = None if None in reached else pytest.approx(np.median(reached))
        assert s["median_time_to_target"] == median
        falls = [
            max(0, *(a["accuracy"] - b["accuracy"] for a, b in zip(c, c[1:], strict=False)))
            for c in mine
        ]
        assert s["largest_fall"] == pytest.approx(np.mean(falls))
        steals = [runs[system, nprocs, seed]["steal"] for seed in (0, 1)]
        assert s["steal"] == (None if None in steals else pytest.approx(np.mean(steals)))
        if system == "alone":
            continue
        defaults = [runs[system, nprocs, seed]["defaults"] for seed in (0, 1)]
        assert s["defaults_epochs"] == np.mean([d["epochs"] for d in defaults])
        assert s["defaults_seconds"] == pytest.approx(np.mean([d["seconds"] for d in defaults]))
    assert runs["sparcml", 2, 0]["local_steps"] >= 1
    assert (tmp_path / "scaling-url-like-dense-shm.png").stat().st_size > 10_000
    assert (tmp_path / "epochs-url-like-dense.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("span", "labels"),
    [
        ((0.15, 3.0), ["0.2", "0.5", "1", "2"]),  # under 2.5 decades: 1, 2 and 5 times
        ((3.0, 30_000.0), ["10", "100", "1000", "10000"]),  # wider: the powers of ten
    ],
)
def test_a_log_axis_of_seconds_is_labelled_in_plain_numbers_that_do_not_overlap(span, labels):
    from sparcml_apps.bench import plots

    fig, ax = plots._pyplot().subplots()
    ax.plot(span, (0, 1))
    plots._log_x(ax)
    fig.canvas.draw()
    low, high = ax.get_xlim()
    shown = [t.get_text() for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high]
    assert shown == labels
    assert not any(t.get_text() for t in ax.xaxis.get_minorticklabels())


CELLS = [("sparcml", 1), ("scikit-learn", 1), ("sparcml", 2), ("alone", 2)]


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="no lscpu on this machine")
def test_the_many_core_mode_counts_cores_as_lscpu_does():
    from sparcml_apps.bench._many_core import cores, physical_cores

    mine = os.sched_getaffinity(0)
    listed = subprocess.run(["lscpu", "--parse=CPU,CORE,SOCKET"], capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    rows = [line.split(",") for line in listed.splitlines() if not line.startswith("#")]
    assert cores() == len(mine)
    assert physical_cores() == len({(s, c) for cpu, c, s in rows if int(cpu) in mine})


def test_scaling_on_many_cores(tmp_path):
    from sparcml_apps.bench import _many_core as mode

    quick("scaling", tmp_path, "--many-core", "--datasets", "url-like-dense")
    found = json.loads((tmp_path / "scaling-many-core.json").read_text())
    assert (found["cpus"], found["cores"]) == (mode.cores(), mode.physical_cores())
    rows = {row["nprocs"]: row for row in found["summary"]}
    assert sorted(rows) == mode.rank_counts(mode.cores())
    # one rank's default fits are this process's fits of the same rows
    X, y = make_url_like(15_000, 100_000, random_state=0, **GENERATORS["url-like-dense"])
    X, y, Xt, yt = X[:12_000], y[:12_000], X[12_000:], y[12_000:]
    fits = {(r["loss"], r["nprocs"], r["seed"]): r for r in found["records"] if "defaults" in r}
    for loss in mode.LOSSES:
        for seed in (0, 1):
            model = SparseSGDClassifier(loss=loss, random_state=seed).fit(X, y)
            one = fits[loss, 1, seed]["defaults"]
            assert one["epochs"] == model.n_iter_
            assert one["accuracy"] == model.score(Xt, yt)
            assert one["exchanges"] == one["exchange_seconds"] == 0  # one rank: none
            assert 0 < one["epoch_seconds"] <= one["seconds"]
        for nprocs, row in rows.items():
            done = [fits[loss, nprocs, seed]["defaults"] for seed in (0, 1)]
            assert row[f"{loss}_epochs"] == np.mean([d["epochs"] for d in done])
            assert row[f"{loss}_accuracy"] == pytest.approx(np.mean([d["accuracy"] for d in done]))
            if nprocs > 1:  # at least one exchange an epoch, which takes part of its time
                for d in done:
                    assert d["exchanges"] >= d["epochs"]
                    assert 0 < d["exchange_seconds"] < d["epoch_seconds"] <= d["seconds"]
                shares = [d["exchange_seconds"] / d["epoch_seconds"] for d in done]
                assert row[f"{loss}_exchange_share"] == pytest.approx(np.mean(shares))
    # the fixed epochs and the ranks alone, and the sparse allreduce against the dense one
    # at every P > 1 (at 0.1% of 2**24 entries it sends a small share of the bytes)
    for nprocs, row in rows.items():
        assert row["sparcml_epochs_seconds"] > 0 and row["alone_epochs_seconds"] > 0
        for density in mode.ALLREDUCE_DENSITIES:
            assert (f"allreduce_{density}" in row) == (nprocs > 1)
        if nprocs > 1:
            assert row[f"allreduce_{mode.ALLREDUCE_DENSITIES[0]}"] > 1
    assert (tmp_path / "scaling-many-core.png").stat().st_size > 10_000


def test_stopping(tmp_path):
    quick("stopping", tmp_path, "--datasets", "url-like-flat", "--losses", "log_loss")
    found = records(tmp_path, "stopping")
    runs = {(r["system"], r["nprocs"], r["seed"]): r["defaults"] for r in found["records"]}
    assert set(runs) == {(s, p, seed) for s, p in CELLS[:3] for seed in (0, 1)}
    # one rank's fit and scikit-learn's are those of the same rows in this process
    options = {**GENERATORS["url-like-flat"], "n_features": 100_000}  # --quick's
    X, y = make_url_like(20_000, random_state=0, **options)
    X, y, Xt, yt = X[:16_000], y[:16_000], X[16_000:], y[16_000:]
    for seed in (0, 1):
        ours = SparseSGDClassifier(loss="log_loss", random_state=seed).fit(X, y)
        assert runs["sparcml", 1, seed]["epochs"] == ours.n_iter_
        assert runs["sparcml", 1, seed]["accuracy"] == ours.score(Xt, yt)
        theirs = SGDClassifier(loss="log_loss", random_state=seed).fit(X, y)
        assert runs["scikit-learn", 1, seed]["epochs"] == theirs.n_iter_
        assert runs["scikit-learn", 1, seed]["accuracy"] == theirs.score(Xt, yt)
    summary = {(s["system"], s["nprocs"]): s for s in found["summary"]}
    for (system, nprocs), s in summary.items():
        mine = [runs[system, nprocs, seed] for seed in (0, 1)]
        assert s["epochs"] == np.mean([r["epochs"] for r in mine])
        assert (s["epochs_min"], s["epochs_max"]) == (
            min(r["epochs"] for r in mine), max(r["epochs"] for r in mine))  # fmt: skip
        assert s["accuracy"] == pytest.approx(np.mean([r["accuracy"] for r in mine]))
    more = [
        runs["sparcml", 2, seed]["epochs"] - runs["sparcml", 1, seed]["epochs"] for seed in (0, 1)
    ]
    assert summary["sparcml", 2]["more_epochs"] == np.mean(more)
    assert summary["sparcml", 2]["most_more_epochs"] == max(more)
    ratios = [runs["sparcml", 2, s]["seconds"] / runs["sparcml", 1, s]["seconds"] for s in (0, 1)]
    assert summary["sparcml", 2]["seconds_ratio"] == pytest.approx(np.mean(ratios))
    assert "more_epochs" not in summary["scikit-learn", 1]


def test_scaling_report_sets_ranks_against_half_as_many():
    from argparse import Namespace

    from sparcml_apps.bench.scaling import report

    def cell(nprocs, system, time, epoch):
        return {
            "dataset": "d", "network": "shm", "nprocs": nprocs, "system": system,
            "seeds": 2, "target": 0.8, "time_to_target": time, "median_time_to_target": time,
            "reached": 2 if time else 0, "final_accuracy": 0.9, "largest_fall": 0.0,
            "seconds_per_epoch": epoch, "mb_sent_per_epoch": 0.0, "local_steps": None,
            "steal": None,
        }  # fmt: skip

    summary = [
        cell(1, "sparcml", 2.0, 1.0), cell(2, "sparcml", 1.0, 0.5), cell(4, "sparcml", 1.2, 0.6),
        cell(2, "alone", None, 0.4), cell(4, "alone", None, 0.5),
    ]  # fmt: skip
    args = Namespace(seeds=2, target_epochs=3, target_gap=0.003)
    lines = [line for line in report(summary, args).splitlines() if "against 2" in line]
    assert lines == [
        "4 ranks against 2 on d (shm): time to target 1.20x (medians 1.20x), "
        "seconds an epoch 1.20x",
        "4 ranks against 2 on d (shm, each rank alone): seconds an epoch 1.25x",
    ]


def test_stolen_share():
    from sparcml_apps.bench.scaling import cpu_times, stolen

    assert stolen((10, 1_000), (40, 1_600)) == pytest.approx(30 / 600)
    assert stolen(None, (40, 1_600)) is None and stolen((40, 1_600), (40, 1_600)) is None
    now = cpu_times()
    if now is None:
        pytest.skip("no /proc/stat here")
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:9]]
    later = cpu_times()
    assert now[0] <= fields[7] <= later[0] and now[1] <= sum(fields) <= later[1]


@pytest.mark.bench  # 65 s; its parts: test_datasets_synthetic, test_memory, test_train_cli
def test_fullsize(tmp_path):
    quick("fullsize", tmp_path, "--dir", tmp_path / "work")
    found = records(tmp_path, "fullsize")
    assert [s["rows"] for s in found["sizes"]] == [5_000, 20_000] and found[
        "disk_megabytes_per_second"
    ] > 0
    for size in found["sizes"]:
        rows, test_rows = size["rows"], size["test_rows"]
        stem = tmp_path / "work" / f"url-like-{rows}-seed0"
        # the text, converted, is make_url_like's rows, the last tenth to test
        X, y = make_url_like(rows + test_rows, 50_000, random_state=0)
        for part, cut in (("svm", slice(0, rows)), ("t.svm", slice(rows, None))):
            got, labels = load_cache(f"{stem}.{part}.cache")
            assert (got != X[cut]).nnz == 0 and np.array_equal(labels, y[cut])
        assert size["convert"]["rows_per_second"] == pytest.approx(
            rows / size["convert"]["seconds"]
        )
        # parsed and hashed alone: every row, and the file's sha256
        parsed, digest = size["parse"]["out"].split()
        text = (tmp_path / "work" / f"url-like-{rows}-seed0.svm").read_bytes()
        assert int(parsed) == rows and digest == hashlib.sha256(text).hexdigest()
        assert [t["nprocs"] for t in size["train"]] == [1, 2]
        for t in size["train"]:
            # the accuracy reported is the saved model's on the test rows
            model = joblib.load(tmp_path / "work" / f"train-{rows}-P{t['nprocs']}" / "model.joblib")
            assert t["test_accuracy"] == pytest.approx(model.score(X[rows:], y[rows:]), abs=1e-12)
            assert sum(t["rows_per_rank"]) == rows and len(t["epoch_seconds"]) == 3
            assert t["within_bound"] == all(
                p <= b for p, b in zip(t["peak_rss_bytes"], t["bound_bytes"], strict=True)
            )
            assert all(50e6 < p < 4e9 for p in t["peak_rss_bytes"])
        if rows == 5_000:
            assert "dask" not in size
            continue
        # the same rows on two Dask workers: the accuracy of the model it saved
        dask = size["dask"]
        model = joblib.load(tmp_path / "work" / f"train-{rows}-dask" / "model.joblib")
        assert dask["test_accuracy"] == pytest.approx(model.score(X[rows:], y[rows:]), abs=1e-12)
        assert len(dask["peak_rss_bytes"]) == 2 and all(50e6 < p for p in dask["peak_rss_bytes"])
    assert (tmp_path / "fullsize.png").stat().st_size > 10_000


@pytest.mark.bench  # 25 s; tests/test_bench_peers.py tests its parts in make test
@needs_a9a
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_peers(tmp_path):
    train, test = LIBSVM / "a9a", LIBSVM / "a9a.t"
    quick("peers", tmp_path, "--datasets", f"{train},{test}", "--no-data-home")
    found = {r["system"]: r for r in records(tmp_path, "peers")}
    assert list(found) == list(SYSTEMS)
    ran = {}
    for name, r in found.items():
        reason = SYSTEMS[name].missing()
        if reason:  # not installed here: reported, not failed
            assert r["missing"] == reason
            continue
        assert "failed" not in r, r.get("output")
        assert (r["rows"], r["test_rows"], r["n_features"]) == (32561, 16281, 123)
        assert r["split"] == "the dataset's test file"
        assert r["peak_mb"] > 10 and r["load_seconds"] > 0 and r["start_seconds"] >= 0
        assert [run["setting"] for run in r["runs"]] == ["defaults", "tuned"]
        assert r["tuned"] == r["runs"][1]["params"] in [t["params"] for t in r["search"]]
        for run in r["runs"]:
            reached = [p["seconds"] for p in run["points"] if p["accuracy"] >= r["target"]]
            assert run["time_to_target"] == (reached[0] if reached else None)
            assert all(p["seconds"] > 0 for p in run["points"])
        ran[name] = r
    finals = [run["points"][-1]["accuracy"] for r in ran.values() for run in r["runs"]]
    assert next(iter(ran.values()))["target"] == pytest.approx(max(finals) - 0.005)
    X, y = load_svmlight_file(str(train), n_features=123, zero_based=False)
    X_test, y_test = load_svmlight_file(str(test), n_features=123, zero_based=False)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    # the defaults, fitted here on the same rows, score what the benchmark reported
    last = ran["scikit-learn SGDClassifier"]["runs"][0]["points"][-1]
    sgd = SGDClassifier(loss="log_loss", random_state=0, max_iter=last["budget"]).fit(X, y)
    assert sgd.score(X_test, y_test) == last["accuracy"]
    model = estimator(build_parser().parse_args(["train"]), None).fit(X, y)
    epochs = ran["sparcml, 1 rank"]["runs"][0]["points"]
    assert model.score(X_test, y_test) == epochs[-1]["accuracy"]
    assert [p["budget"] for p in epochs] == list(range(1, model.n_iter_ + 1))
    assert (tmp_path / "peers-a9a.png").stat().st_size > 10_000


def test_calibrate_stores_where_it_is_told(tmp_path):
    path = tmp_path / "calibration.json"
    done = subprocess.run(
        [sys.executable, "-m", "sparcml_apps.bench", "calibrate", "--quick", "--path", path],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stored = cost_model.stored(2, path)
    assert stored["alpha"] > 0 and stored["beta"] > 0


def test_train_and_overlap_exchange_every_step_unless_told(capsys):
    import argparse

    from sparcml_apps.bench import overlap, train
    from sparcml_apps.bench.__main__ import main

    def parsed(module, *argv):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        return parser.parse_args(argv)

    assert parsed(train).local_steps == parsed(overlap).local_steps == 1
    assert parsed(train, "--local-steps", "auto").local_steps == "auto"
    two = train.methods_at(2, list(train.METHODS), 8)
    assert two and all(options["local_steps"] == 8 for options in two.values())
    one = train.methods_at(1, list(train.METHODS), 1)  # scikit-learn's options: as they are
    assert one["scikit-learn SGDClassifier"] == {"sklearn": True}
    for bad in ("0", "-1", "x", "1.5"):
        with pytest.raises(SystemExit):
            main(["overlap", "--local-steps", bad])
        assert (
            f"argument --local-steps: expected a whole number of at least 1 or 'auto', got '{bad}'"
            in capsys.readouterr().err
        )
