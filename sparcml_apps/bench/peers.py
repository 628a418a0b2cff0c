"""Time to a target accuracy against the tools users would pick instead.

On each dataset (the data of the url-like generators, every catalogue dataset already in
the data home, and any LIBSVM files given), every system trains on the same rows, written
once as LIBSVM files (and as Vowpal Wabbit text): sparcml on 1 and 2 ranks (``sparcml
train --ranks P``) and ``SparseSGDClassifier(n_jobs=2)`` called from Python (its
pool started with the system), scikit-learn's ``SGDClassifier``, LIBLINEAR (scikit-learn's
``LogisticRegression(solver="liblinear")``), Vowpal Wabbit (its own driver), Spark MLlib's
``LogisticRegression`` and ``LinearSVC`` on ``local[2]``, and Snap ML, each with its
documented defaults and with the setting a small search chose on the first
``--search-rows`` training rows (four fifths to fit, one to score). A system that is not
installed is reported missing. Each system runs in a process of its own, whose peak
memory (the resident memory of its process tree: JVM and MPI ranks included) is sampled.
A curve fits a setting from scratch at growing iterations or passes (sparcml: scores each
epoch), each scored on the test rows off the clock; start (imports, Spark's session,
sparcml's launch), load (reading the files) and training are timed apart. The target is
the best final accuracy of the dataset's runs less ``--target-gap``; a run's time to
target is the training time of its first point that reaches it. Writes JSON, a Markdown
table and a plot of accuracy against time for each dataset.
"""

import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .._paths import directory, option, writable_folder
from ..datasets._home import DEFAULT_HOME, HOME_VARIABLE
from . import _peer_data
from ._output import add_out_argument, apply_quick, draw, slug, write
from ._peer_systems import SYSTEMS

RUN_MODULE = "sparcml_apps.bench._peer_run"
SAMPLE_SECONDS = 0.05
QUICK = {
    "rows": 20_000,
    "max_rows": 40_000,
    "max_test_rows": 20_000,
    "search_rows": 10_000,
    "max_seconds": 5.0,
    "points": 2,
    "candidates": 1,
}


def add_arguments(parser):
    generators = list(_peer_data.GENERATORS)
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=generators,
        metavar="DATASET",
        help=f"{' or '.join(generators)} (synthetic), a catalogue name in the data home, or a "
        "LIBSVM file with its test file after a comma (else a stratified random fifth is held out) "
        f"(default: {' '.join(generators)})",
    )
    parser.add_argument(
        "--no-data-home",
        action="store_true",
        help="leave out the catalogue datasets of the data home (default: every one found "
        "there is added)",
    )
    parser.add_argument(
        "--data-home",
        type=option(directory),
        help=f"where datasets are kept (default: ${HOME_VARIABLE}, else {DEFAULT_HOME})",
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=400_000,
        help="rows of each synthetic dataset, the last fifth for testing (default: 400000)",
    )
    parser.add_argument(
        "--max-rows",
        type=int,
        default=400_000,
        help="training rows kept of a larger dataset, the first (default: 400000)",
    )
    parser.add_argument(
        "--max-test-rows",
        type=int,
        default=100_000,
        help="test rows kept of a larger dataset, the first (default: 100000)",
    )
    parser.add_argument(
        "--search-rows",
        type=int,
        default=100_000,
        help="training rows the settings are searched on (default: 100000)",
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=list(SYSTEMS),
        default=list(SYSTEMS),
        metavar="SYSTEM",
        help=f"of: {'; '.join(SYSTEMS)} (default: all)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="a curve stops before a fit that would take its training time past this (default: 60)",
    )
    parser.add_argument(
        "--points", type=int, default=100, help="most points a curve (default: 100)"
    )
    parser.add_argument(
        "--candidates",
        type=int,
        default=10,
        help="most candidate settings the search of a system tries (default: 10)",
    )
    parser.add_argument(
        "--target-gap",
        type=float,
        default=0.005,
        help="target accuracy: the best final accuracy less this (default: 0.005)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds a system may take on a dataset (default: 3600)",
    )
    parser.add_argument(
        "--work",
        type=option(writable_folder),
        help="folder for the datasets' files, made if missing; they are removed after each "
        "dataset (default: the "
        "system's temporary folder)",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="print each system's version, or why it cannot run, and exit",
    )
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="small data, short curves")


def run(args):
    if args.list:
        for name, system in SYSTEMS.items():
            reason = system.missing()
            print(f"{name}: {'missing: ' + reason if reason else system.version()}")
        return 0
    apply_quick(args, QUICK)
    specs = list(args.datasets)
    if not args.no_data_home:
        specs += [s for s in _peer_data.in_data_home(args.data_home) if s not in specs]
    for spec in specs:  # a dataset that cannot be read fails before any run
        _peer_data.check(spec, args.data_home)
    records = []
    for spec in specs:
        if args.work is not None:
            args.work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="sparcml-peers-", dir=args.work) as folder:
            files = _prepare(spec, Path(folder), args)
            for name in args.systems:
                record = run_system(name, files, args)
                records.append(record)
                print(_progress(record), flush=True)
    summarize(records, args.target_gap)
    text = table(records)
    print(f"\n{text}")
    write(args.out, "peers", records, text)
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        mine = [r for r in records if r["dataset"] == dataset and r.get("runs")]
        if mine:
            draw("peers", mine, args.out / f"peers-{slug(dataset)}.png", dataset)
    return 0


def _prepare(spec, folder, args):
    print(f"writing the rows of {spec} ...", flush=True)
    name, X, y, X_test, y_test = _peer_data.rows(
        spec,
        generator_rows=args.rows,
        max_rows=args.max_rows,
        max_test_rows=args.max_test_rows,
        data_home=args.data_home,
    )
    return _peer_data.write(
        folder, name, X, y, X_test, y_test, search_rows=args.search_rows,
        split=_peer_data.split(spec),
    )  # fmt: skip


def run_system(name, files, args):
    """The record of system ``name`` on ``files``: run in a process of its own, or why
    it is missing or failed."""
    system = SYSTEMS[name]
    record = {
        "dataset": files.name,
        "rows": files.rows,
        "test_rows": files.test_rows,
        "n_features": files.n_features,
        "split": files.split,
        "system": name,
    }
    reason = system.missing()
    if reason:
        return {**record, "missing": reason}
    command = [
        sys.executable, "-m", RUN_MODULE, name, "--files", json.dumps(files.as_dict()),
        "--max-seconds", str(args.max_seconds), "--max-points", str(args.points),
        "--candidates", str(args.candidates),
    ]  # fmt: skip
    begin = time.perf_counter()
    try:
        returncode, stdout, stderr, peak = measured(command, args.timeout)
    except subprocess.TimeoutExpired:
        return {**record, "failed": f"no result within {args.timeout:g} s"}
    found = [line for line in stdout.splitlines() if line.startswith("{")]
    if returncode != 0 or not found:
        lines = (stderr or stdout).strip().splitlines() or [f"exit status {returncode}"]
        return {**record, "failed": lines[-1][:300], "output": (stdout + stderr)[-5000:]}
    wall = time.perf_counter() - begin  # search and curves included: what the run cost
    return {**record, **json.loads(found[-1]), "peak_mb": peak / 1e6, "wall_seconds": wall}


def measured(command, timeout):
    """Run ``command``; ``(returncode, stdout, stderr, peak bytes)``, the peak being the
    largest sampled sum of the resident memory of the process and its descendants."""
    import psutil

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            command, stdout=out, stderr=err, text=True, start_new_session=True
        )
        peak, deadline = 0, time.monotonic() + timeout
        try:
            root = psutil.Process(process.pid)
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(command, timeout)
                peak = max(peak, _resident(root))
                time.sleep(SAMPLE_SECONDS)
        except BaseException:
            _kill(process)
            raise
        out.seek(0)
        err.seek(0)
        return process.returncode, out.read(), err.read(), peak


def _resident(root):
    import psutil

    total = 0
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def _kill(process):
    import os
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def summarize(records, gap):
    """Add each dataset's ``target`` to its records, and to each run its
    ``time_to_target`` (None: not reached) and ``final_accuracy``."""
    for dataset in {r["dataset"] for r in records}:
        runs = [run for r in records if r["dataset"] == dataset for run in r.get("runs", [])]
        if not runs:
            continue
        target = max(run["points"][-1]["accuracy"] for run in runs) - gap
        for r in records:
            if r["dataset"] == dataset:
                r["target"] = target
        for run in runs:
            reached = [p for p in run["points"] if p["accuracy"] >= target]
            run["time_to_target"] = reached[0]["seconds"] if reached else None
            run["final_accuracy"] = run["points"][-1]["accuracy"]


def table(records):
    """The records as Markdown: a table of runs and a table of searches, each dataset."""
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        mine = [r for r in records if r["dataset"] == dataset]
        first = mine[0]
        target = first.get("target")
        out += [
            f"### {dataset}",
            "",
            f"{first['rows']:,} training rows, {first['test_rows']:,} test rows "
            f"({first['split']}), {first['n_features']:,} columns"
            + (f"; target accuracy {target:.4f}" if target is not None else ""),
            "",
            "| system | version | setting | time to target (s) | start + load + to target (s) "
            "| final accuracy | training (s) | budget | start (s) | load (s) | peak memory (MB) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in mine:
            out += _rows(r)
        out += [
            "",
            "| system | candidate | validation accuracy | training (s) | chosen |",
            "|---|---|---|---|---|",
        ]
        for r in mine:
            for tried in r.get("search", []):
                chosen = "yes" if tried["params"] == r["tuned"] else ""
                out.append(
                    f"| {r['system']} | {_params(tried['params'])} | {tried['accuracy']:.4f} "
                    f"| {tried['seconds']:.2f} | {chosen} |"
                )
        out.append("")
    return "\n".join(out).rstrip()


def _rows(r):
    if "missing" in r or "failed" in r:
        why = f"missing: {r['missing']}" if "missing" in r else f"failed: {r['failed']}"
        return [f"| {r['system']} |  | {why} |  |  |  |  |  |  |  |  |"]
    rows = []
    for run in r["runs"]:
        time = run["time_to_target"]
        setting = run["setting"] + (f": {_params(run['params'])}" if run["params"] else "")
        rows.append(
            f"| {r['system']} | {r['version']} | {setting} "
            f"| {_seconds(time)} "
            f"| {_seconds(time and time + r['start_seconds'] + r['load_seconds'])} "
            f"| {run['final_accuracy']:.4f} | {run['points'][-1]['seconds']:.2f} "
            f"| {_budget(r['system'], run)} | {r['start_seconds']:.1f} "
            f"| {r['load_seconds']:.1f} | {r['peak_mb']:,.0f} |"
        )
    return rows


def _seconds(value):
    return "not reached" if value is None else f"{value:.2f}"


def _budget(system, run):
    """The budget of the last fit of a run: ``maxIter 30 (capped at 30 of 100)``."""
    last = run["points"][-1]
    name = SYSTEMS[system].budget if system in SYSTEMS else "budget"
    text = f"{name} {last['budget']:g}"
    if run["converged"]:
        text += f" (converged in {last['used']})"
    elif run["capped"]:
        text += " (capped)"
    return text


def _params(params):
    return ", ".join(f"{key}={_number(value)}" for key, value in params.items())


def _number(value):
    if isinstance(value, float) and value and not 1e-3 <= abs(value) < 1e4:
        return f"{value:.0e}"
    return f"{value:g}" if isinstance(value, float) and math.isfinite(value) else str(value)


def _progress(r):
    head = f"{r['dataset']} | {r['system']}"
    if "missing" in r:
        return f"{head}: missing: {r['missing']}"
    if "failed" in r:
        return f"{head}: failed: {r['failed']}"
    runs = "; ".join(
        f"{run['setting']} {run['points'][-1]['accuracy']:.4f} after "
        f"{run['points'][-1]['seconds']:.2f} s"
        for run in r["runs"]
    )
    cost = f"load {r['load_seconds']:.1f} s, peak {r['peak_mb']:,.0f} MB"
    return f"{head} {r['version']}: {runs}; {cost}; {r['wall_seconds']:.0f} s in all"
