"""url at its real size, from LIBSVM text to a model: time and memory of every stage.

Writes url-like LIBSVM files of url's shape (``write_url_like``, which never holds the
matrix): 2,396,130 training rows and 239,613 test rows of one problem, 3,231,961
columns, about 116 nonzeros a row; and, for comparison, a 400,000-row problem of the same
generator (40,000 test rows). Then, each stage a fresh process: ``convert_svmlight`` of
the files to CSR caches, with numba's default threads (seconds, CPU seconds, rows a
second, peak memory), the same parsing and hashing of the training file without writing
a cache (what the disk costs), each ``--repeats`` times (the median run), ``load_cache``
of the training cache, and ``sparcml train`` on 1 and 2 ranks, default options, 3 epochs
(seconds an epoch, rows a second a rank, test accuracy, each rank's peak memory against
its shard's CSR bytes plus 4 times the model's bytes plus 500 MB). Where memory cgroups
can be made (root, cgroup v1), 1 rank trains again within a memory limit of half its
rows' bytes: out of core (:mod:`sparcml_apps.training.memory`).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import _mpiexec
from ..datasets import shard, write_url_like
from ..datasets._cache import BLOCK_BYTES, NpyWriter
from ..training import memory
from . import cgroups
from ._output import add_dir_argument, add_out_argument, apply_quick, draw, in_folder, write

URL = {"rows": 2_396_130, "features": 3_231_961, "nnz_per_row": 116}
"""The shape of LIBSVM's url (training rows, columns, mean nonzeros a row)."""
TEST_SHARE = 0.1
"""Test rows, as a share of the training rows."""
_KIB = 1024


def add_arguments(parser):
    parser.add_argument(
        "--rows", type=int, default=URL["rows"], help="training rows (default: %(default)s)"
    )
    parser.add_argument(
        "--compare-rows",
        type=int,
        default=400_000,
        help="training rows of the run to compare with (default: %(default)s)",
    )
    parser.add_argument(
        "--features", type=int, default=URL["features"], help="columns (default: %(default)s)"
    )
    parser.add_argument(
        "--nnz-per-row",
        type=int,
        default=URL["nnz_per_row"],
        help="mean nonzeros a row (default: %(default)s)",
    )
    parser.add_argument("--epochs", type=int, default=3, help="epochs (default: %(default)s)")
    parser.add_argument(
        "--ranks", type=int, nargs="+", default=[1, 2], help="rank counts (default: 1 2)"
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed (default: 0)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of each conversion and training (default: %(default)s)",
    )
    add_dir_argument(parser, "the files and caches")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20,000 rows against 5,000 of 50,000 columns, for a smoke test (default: off)",
    )
    add_out_argument(parser)


def run(args):
    apply_quick(args, {"rows": 20_000, "compare_rows": 5_000, "features": 50_000, "repeats": 1})
    return in_folder(args, _measure, "sparcml-bench-fullsize-")


def _measure(args, folder):
    records = {"cores": os.cpu_count(), "epochs": args.epochs, "repeats": args.repeats}
    records["sizes"] = []
    records["disk_megabytes_per_second"] = disk_rate(folder)
    for rows in (args.compare_rows, args.rows):
        records["sizes"].append(_size(args, folder, rows))
    text = report(records)
    print(text)
    write(args.out, "fullsize", records, text)
    draw("fullsize", records, args.out / "fullsize.png")
    return 0


def _size(args, folder, rows):
    """Every stage at ``rows`` training rows."""
    test_rows = int(round(rows * TEST_SHARE))
    stem = folder / f"url-like-{rows}-seed{args.seed}"
    train, test = Path(f"{stem}.svm"), Path(f"{stem}.t.svm")
    record = {"rows": rows, "test_rows": test_rows, "features": args.features}
    if not (train.exists() and test.exists()):
        print(f"writing {rows:,} + {test_rows:,} url-like rows to {train} ...", flush=True)
        begun = time.perf_counter()
        write_url_like(
            train, rows + test_rows, args.features, args.nnz_per_row, args.seed,
            test_path=test, test_rows=test_rows, progress=_progress_bar(),
        )  # fmt: skip
        record["write_seconds"] = time.perf_counter() - begun
    record["megabytes"] = train.stat().st_size / 1e6
    caches = {}
    # the threads a user gets, whatever this run's NUMBA_NUM_THREADS
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    for name, path in (("train", train), ("test", test)):
        caches[name] = Path(f"{path}.cache")
        if name == "train" or not caches[name].exists():
            runs = []
            for _ in range(args.repeats if name == "train" else 1):
                # a conversion replaces the cache there once it is complete, as a user's
                # does (deleting the old one first makes the file system free its blocks
                # while the new one is written: up to 2 s more here)
                runs.append(_stage(_CONVERT, path, caches[name], args.features, env=env))
            if name == "train":
                record["convert"] = _median(runs)
    runs = [_stage(_PARSE, train, args.features, env=env) for _ in range(args.repeats)]
    record["parse"] = _median(runs)
    for stage in ("convert", "parse"):
        record[stage]["rows_per_second"] = rows / record[stage]["seconds"]
    record["cache_megabytes"] = sum(f.stat().st_size for f in caches["train"].iterdir()) / 1e6
    record["load_cache"] = _stage(_LOAD, caches["train"])
    record["train"] = [
        _train(caches, nprocs, args, folder / f"train-{rows}-P{nprocs}") for nprocs in args.ranks
    ]
    if rows == args.rows:  # (Dask at the full size only)
        record["dask"] = _train(caches, 2, args, folder / f"train-{rows}-dask", dask=True)
    limit = memory.csr_bytes(shard(caches["train"], 0, 1, args.features)[0]) // 2
    if not cgroups.available():
        print(f"out of core left out: {cgroups.WHY_NOT}")
    elif limit < 2 * memory.SLACK:
        print(f"out of core left out at {rows:,} rows: half their bytes would not hold a rank")
    else:
        run = _train(caches, 1, args, folder / f"train-{rows}-P1-limited", limit=limit)
        record["out_of_core"] = {**run, "limit_bytes": limit}
    return record


_CONVERT = """
import sys
from sparcml_apps.datasets import convert_svmlight
convert_svmlight(sys.argv[1], sys.argv[2], n_features=int(sys.argv[3]))
"""
_PARSE = """
import hashlib, sys
from sparcml_apps.datasets._compression import open_data
from sparcml_apps.datasets._svmlight import iter_pieces
with open_data(sys.argv[1], digest=hashlib.sha256()) as (stream, raw):
    pieces = iter_pieces(stream, sys.argv[1], n_features=int(sys.argv[2]), threads=None)
    print(sum(piece.labels.size for piece in pieces), raw.finish())
"""
_LOAD = """
import sys, time
from sparcml_apps.datasets import load_cache
begun = time.perf_counter()
X, y = load_cache(sys.argv[1])
print(time.perf_counter() - begun, X.shape[0], X.nnz)
"""


def disk_rate(folder, megabytes=1024):
    """MB a second of writing a file of ``megabytes`` to ``folder`` as the cache's files are
    written (in blocks, straight to the disk where the file system allows) and syncing it:
    what bounds a conversion, whose cache must reach the disk before it is installed."""
    block = np.zeros(BLOCK_BYTES, np.uint8)
    path = Path(folder) / ".disk-rate"
    begun = time.perf_counter()
    with NpyWriter(path, np.uint8) as file:
        for _ in range(megabytes * (1 << 20) // block.size):
            file.append(block)
    seconds = time.perf_counter() - begun
    path.unlink()
    return megabytes * (1 << 20) / 1e6 / seconds


def _stage(code, *arguments, env=None):
    """Run ``code`` in a fresh Python process (``env``: its environment, None: this
    one's): its wall seconds, CPU seconds (of all its threads) and peak memory."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        begun = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-c", code, *map(str, arguments)], stdout=out, stderr=err, env=env
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - begun
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if process.returncode:
            raise RuntimeError(f"a stage failed ({arguments}):\n{err.read()}")
        return {
            "seconds": seconds,
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_bytes": usage.ru_maxrss * _KIB,
            "out": out.read(),
        }


def _median(runs):
    """The run of median seconds, with every run's seconds beside."""
    chosen = dict(sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2])
    return {**chosen, "runs_seconds": [run["seconds"] for run in runs]}


def _train(caches, nprocs, args, folder, limit=None, dask=False):
    """``sparcml train`` on ``nprocs`` ranks, ``args.repeats`` times: each epoch's median
    seconds, the accuracy, each rank's largest peak memory against its bound. With
    ``limit``, in a memory cgroup of that many bytes, the caches' pages dropped first from
    the page cache (so that the run reads them into memory of its own). With ``dask``, on
    ``nprocs`` Dask workers of one ``mpiexec`` job (``--dask``: a scheduler and a client
    besides), each loading its chunk, the rows a rank would."""
    runs = [_train_once(caches, nprocs, args, folder, limit, dask) for _ in range(args.repeats)]
    record = runs[0]
    seconds = [run.pop("epoch_seconds") for run in runs]
    median = float(np.median(seconds))  # (averaging starts with the second epoch)
    peaks = [max(ranks) for ranks in zip(*(run["peak_rss_bytes"] for run in runs), strict=True)]
    record.update(
        runs=seconds,
        epoch_seconds=[float(e) for e in np.median(seconds, axis=0)],
        median_epoch_seconds=median,
        rows_per_second_per_rank=max(record["rows_per_rank"]) / median,
        peak_rss_bytes=peaks,
        within_bound=all(p <= b for p, b in zip(peaks, record["bound_bytes"], strict=True)),
        same_accuracy=len({run["test_accuracy"] for run in runs}) == 1,
    )
    return record


def _train_once(caches, nprocs, args, folder, limit, dask):
    folder.mkdir(parents=True, exist_ok=True)
    metrics = folder / "metrics.json"
    sparcml = [Path(sys.executable).with_name("sparcml"), "train"]
    if dask:  # a scheduler, the client and the workers, one mpiexec job
        sparcml = [_mpiexec.mpiexec(), "-n", nprocs + 2, *sparcml, "--dask"]
    else:
        sparcml += ["--ranks", nprocs]
    command = [
        *sparcml, "--dataset", caches["train"], "--test", caches["test"],
        "--n-features", args.features, "--epochs", args.epochs,
        "--model", folder / "model.joblib", "--metrics", metrics,
    ]  # fmt: skip
    launch = f"on {nprocs} Dask workers" if dask else f"--ranks {nprocs}"
    within = f" within {limit / 1e6:,.0f} MB" if limit else ""
    print(f"sparcml train {launch} on {caches['train']}{within} ...", flush=True)
    env = {**os.environ, **_mpiexec.RANK_ENV}
    command = list(map(str, command))
    if limit is None:
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    else:
        for cache in caches.values():
            cgroups.evict(cache)
        with cgroups.limited(limit) as group:
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, preexec_fn=group.join
            )
            group_peak = group.peak()
    if done.returncode:
        raise RuntimeError(f"sparcml train --ranks {nprocs} failed:\n{done.stderr}")
    print(done.stdout, done.stderr, flush=True)
    m = json.loads(metrics.read_text())
    rows_per_rank, bounds = shards(caches, nprocs, args.features)
    return {
        "nprocs": nprocs,
        "epoch_seconds": [row["seconds"] for row in m["per_epoch"]],
        "rows_per_rank": rows_per_rank,
        "test_accuracy": m["test_accuracy"],
        "load_seconds": m["load_seconds"],
        "peak_rss_bytes": m["peak_rss_bytes"],
        "bound_bytes": bounds,
        "out_of_core": "out of core" in done.stderr,
        **({"cgroup_peak_bytes": group_peak} if limit else {}),
    }


def shards(caches, nprocs, n_features):
    """Each rank's training rows, and its memory bound: the CSR bytes (values, indices, row
    pointers and labels) of its shards of the training and the test rows (which it holds
    to score every epoch) plus ``memory.MODELS`` (4) times the model's bytes plus
    ``memory.SLACK`` (500 MB)."""
    rows, bounds = [], []
    for rank in range(nprocs):
        csr = 0
        for name in ("test", "train"):
            X, y = shard(caches[name], rank, nprocs, n_features)  # memory maps: nothing read
            csr += memory.csr_bytes(X) + np.asarray(y).nbytes
        rows.append(X.shape[0])
        bounds.append(int(csr + memory.MODELS * 8 * (n_features + 1) + memory.SLACK))
    return rows, bounds


def _progress_bar():
    """A progress callback for ``write_url_like``: a tqdm bar of the rows written."""
    from tqdm import tqdm

    bar = None

    def show(done, total, seconds):
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit=" rows", unit_scale=True, desc="write", leave=False)
        bar.update(done - bar.n)
        if done == total:
            bar.close()

    return show


def report(r):
    """The figures as Markdown."""
    disk = r["disk_megabytes_per_second"]
    lines = [
        f"Each stage a fresh process; {r['cores']} cores; the conversion parses with a "
        "thread a core; `sparcml train` with default "
        f"options, {r['epochs']} epochs, NUMBA_NUM_THREADS=1 a rank, {r['repeats']} runs "
        "(each epoch's median seconds over them; the largest peak memory); the conversion and "
        f"the parse alone {r['repeats']} times each (the median run). The disk takes "
        f"{disk:.0f} MB/s written as the cache is (past the page cache) and synced: the "
        "cache's bytes over that rate bound the conversion.",
        "",
        "| training rows | MB of text | convert (s) | each run (s) | CPU (s) | rows/s "
        "| parse and sha256 only (s) | rows/s | convert peak (MB) | MB of cache "
        "| cache over the disk's rate (s) | load cache (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        c, p = s["convert"], s["parse"]
        load = float(s["load_cache"]["out"].split()[0])
        lines.append(
            f"| {s['rows']:,} | {s['megabytes']:,.0f} | {c['seconds']:.1f} | "
            f"{' / '.join(f'{t:.1f}' for t in c['runs_seconds'])} | {c['cpu_seconds']:.1f} | "
            f"{c['rows_per_second']:,.0f} | {p['seconds']:.1f} | {p['rows_per_second']:,.0f} | "
            f"{c['peak_rss_bytes'] / 1e6:,.0f} | "
            f"{s['cache_megabytes']:,.0f} | {s['cache_megabytes'] / disk:.1f} | {load * 1e3:.1f} |"
        )
    lines += [
        "",
        "| training rows | P | seconds of each epoch | rows/s a rank (median epoch of all runs) | "
        "test accuracy | peak MB a rank | bound MB a rank | within |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        for t in s["train"]:
            peaks = " / ".join(f"{p / 1e6:,.0f}" for p in t["peak_rss_bytes"])
            bounds = " / ".join(f"{b / 1e6:,.0f}" for b in t["bound_bytes"])
            lines.append(
                f"| {s['rows']:,} | {t['nprocs']} | "
                f"{' / '.join(f'{e:.2f}' for e in t['epoch_seconds'])} | "
                f"{t['rows_per_second_per_rank']:,.0f} | {t['test_accuracy']:.4f} | {peaks} | "
                f"{bounds} | {'yes' if t['within_bound'] else 'NO'} |"
            )
    small, full = r["sizes"][0], r["sizes"][-1]
    lines.append("")
    for s in r["sizes"]:
        if "dask" not in s:
            continue
        d = s["dask"]
        peaks = " and ".join(f"{p / 1e6:,.0f}" for p in d["peak_rss_bytes"])
        lines.append(
            f"- {s['rows']:,} rows on 2 Dask workers (`--dask`, one `mpiexec` job): epochs "
            f"{' / '.join(f'{e:.2f}' for e in d['epoch_seconds'])} s, test accuracy "
            f"{d['test_accuracy']:.4f}; each worker's peak {peaks} MB against a bound of "
            f"{d['bound_bytes'][0] / 1e6:,.0f} MB: {'within' if d['within_bound'] else 'OVER'}"
        )
    for s in r["sizes"]:
        if "out_of_core" not in s:
            continue
        o, one = s["out_of_core"], s["train"][0]
        lines.append(
            f"- {s['rows']:,} rows on 1 rank in a memory cgroup of {o['limit_bytes'] / 1e6:,.0f}"
            f" MB (half the rows' CSR bytes), the cache out of the page cache first: "
            f"{'out of core' if o['out_of_core'] else 'in memory (!)'}, epochs "
            f"{' / '.join(f'{e:.2f}' for e in o['epoch_seconds'])} s, "
            f"{sum(o['epoch_seconds']) / sum(one['epoch_seconds']):.2f}x the time in memory; "
            f"test accuracy {o['test_accuracy']:.4f} against {one['test_accuracy']:.4f}; peak "
            f"RSS {o['peak_rss_bytes'][0] / 1e6:,.0f} MB, the cgroup's peak (page cache too) "
            f"{o['cgroup_peak_bytes'] / 1e6:,.0f} MB"
        )
    for a, b in zip(small["train"], full["train"], strict=True):
        ratio = b["rows_per_second_per_rank"] / a["rows_per_second_per_rank"]
        lines.append(
            f"- {b['nprocs']} rank(s): rows a second a rank at {full['rows']:,} rows are "
            f"{ratio:.2f}x those at {small['rows']:,}"
        )
    return "\n".join(lines)
