"""LIBSVM parse speed as users meet it: a fresh process that imports a parser and loads a file.

Writes two url-like files of the same rows (``make_url_like``, 3,231,961 columns, about
80 nonzeros a row): values with 5 decimals, and float64 values as scikit-learn's
``dump_svmlight_file`` writes them (16 to 17 significant digits); a9a too, if found.
Each parser then loads each file in a process of its own, in turn (sparcml with its
threads and with one, ``svmloader`` where installed, scikit-learn's
``load_svmlight_file``), ``--repeats`` times with the file in the page cache; the median
of import plus load is reported, with rows/s, MB/s and how much faster sparcml is, and
whether every parser gave scikit-learn's matrix bit for bit. sparcml also loads each file
a second time in its process, to show what the first call costs beyond a later one. The
CSR cache of the 5-decimal file is timed as well (conversion, then loading memory maps).
"""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file

from sparcml_apps.datasets import convert_svmlight, load_cache, make_url_like

from .._paths import option, readable_file
from ._output import add_dir_argument, add_out_argument, apply_quick, in_folder, write

N_FEATURES = 3_231_961
NNZ_PER_ROW = 80
CHILD = Path(__file__).with_name("_parse_once.py")
PARSERS = {
    "sparcml": "sparcml `load_svmlight`",
    "sparcml-1": "sparcml `load_svmlight`, 1 thread",
    "svmloader": "svmloader `load_svmfile`",
    "sklearn": "scikit-learn `load_svmlight_file`",
}


def add_arguments(parser):
    parser.add_argument(
        "--rows", type=int, default=200_000, help="rows of the url-like files (default: 200000)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="fresh processes a parser and file (default: 3)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="NUMBA_NUM_THREADS of the sparcml processes (default: the cores this may use)",
    )
    parser.add_argument(
        "--a9a",
        type=option(readable_file),
        default=Path(os.environ.get("SPARCML_TEST_DATA", "../shared/data/libsvm")) / "a9a",
        help="the LIBSVM a9a file, left out if absent (default: a9a in $SPARCML_TEST_DATA, "
        "else ../shared/data/libsvm)",
    )
    add_dir_argument(parser, "the files")
    parser.add_argument("--seed", type=int, default=0, help="make_url_like seed (default: 0)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20,000 rows and one process each, for a smoke test (default: off)",
    )
    add_out_argument(parser)


def run(args):
    apply_quick(args, {"rows": 20_000, "repeats": 1})
    return in_folder(args, _measure, "sparcml-bench-parse-")


def _measure(args, folder):
    files = _url_like_files(folder, args.rows, args.seed)
    if args.a9a.is_file():
        files["a9a"] = (args.a9a, 123)
    else:
        print(f"no a9a at {args.a9a}: left out")
    load = {"start": os.getloadavg()[0]}
    records = {"cores": os.cpu_count(), "threads": args.threads, "files": []}
    for name, (path, n_features) in files.items():
        _warm(path)
        runs = {parser: [] for parser in PARSERS}
        for _ in range(args.repeats):  # parsers in turn, so that they share the load
            for parser in PARSERS:
                runs[parser].append(_fresh(parser, path, n_features, args.threads))
        records["files"].append(_summary(name, path, runs))
    load["end"] = os.getloadavg()[0]
    records["load_average"] = load
    records["cache"] = _cache(files["url-like, 5 decimals"][0], folder / "cache")
    text = report(records)
    print(text)
    write(args.out, "parse", records, text)
    return 0


def _url_like_files(folder, rows, seed):
    """The two url-like files of the same rows: {name: (path, n_features)}."""
    five = folder / f"url-like-{rows}-seed{seed}-5-decimals.svm"
    full = folder / f"url-like-{rows}-seed{seed}-float64.svm"
    if not (five.exists() and full.exists()):
        print(f"writing {rows:,} url-like rows to {five} and {full} ...", flush=True)
        X, y = make_url_like(rows, nnz_per_row=NNZ_PER_ROW, random_state=seed)
        X.data = np.random.default_rng(seed).random(X.nnz)
        _write_decimals(X, y, five)
        dump_svmlight_file(X, y, str(full), zero_based=False)
    return {"url-like, 5 decimals": (five, N_FEATURES), "url-like, float64": (full, N_FEATURES)}


def _write_decimals(X, y, path, rows_at_once=10_000):
    """``X`` (values in [0, 1)) as LIBSVM text with values of 5 decimals in [0.00001, 1),
    1-based indices."""
    part = path.with_name(path.name + ".part")
    with open(part, "w") as f:
        for first in range(0, X.shape[0], rows_at_once):
            block = X[first : first + rows_at_once]
            values = (0.00001 + 0.99998 * block.data).tolist()
            pairs = list(map("{}:{:.5f}".format, (block.indices + 1).tolist(), values))
            ends = block.indptr.tolist()
            f.writelines(
                f"{label:g} {' '.join(pairs[ends[r] : ends[r + 1]])}\n"
                for r, label in enumerate(y[first : first + rows_at_once].tolist())
            )
    part.rename(path)


def _warm(path):
    """Read the file once, so that every timed load finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def _fresh(parser, path, n_features, threads):
    """One fresh process of ``parser`` loading ``path``: its record, or None if the parser
    is not installed."""
    env = dict(os.environ)
    if parser.startswith("sparcml"):
        env["NUMBA_NUM_THREADS"] = "1" if parser == "sparcml-1" else str(threads)
    begun = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(CHILD), parser.split("-")[0], str(path), str(n_features)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode and "ModuleNotFoundError" in done.stderr:
        return None
    if done.returncode:
        raise RuntimeError(f"{parser} failed on {path}:\n{done.stderr}")
    record = json.loads(done.stdout.splitlines()[-1])
    record["process_seconds"] = time.perf_counter() - begun
    record["seconds"] = record["import_seconds"] + record["load_seconds"]
    return record


def _summary(name, path, runs):
    """The medians of a file's runs, by parser."""
    megabytes = path.stat().st_size / 1e6
    reference = runs["sklearn"][0]
    summary = {
        "file": name,
        "path": str(path),
        "megabytes": round(megabytes, 1),
        "rows": reference["rows"],
        "nnz": reference["nnz"],
        "parsers": {},
    }
    for parser, records in runs.items():
        if records[0] is None:
            summary["parsers"][parser] = {"missing": True}
            continue
        medians = {
            key: statistics.median(r[key] for r in records)
            for key in records[0]
            if key.endswith("seconds")
        }
        summary["parsers"][parser] = {
            **medians,
            "runs": [r["seconds"] for r in records],
            "rows_per_second": reference["rows"] / medians["seconds"],
            "megabytes_per_second": megabytes / medians["seconds"],
            "identical": all(r["digest"] == reference["digest"] for r in records),
            "version": records[0]["version"],
            **({"threads": records[0]["threads"]} if "threads" in records[0] else {}),
        }
    sparcml = summary["parsers"]["sparcml"]
    for figures in summary["parsers"].values():
        if "seconds" in figures:
            figures["sparcml_faster"] = figures["seconds"] / sparcml["seconds"]
            figures["sparcml_less_cpu"] = figures["cpu_seconds"] / sparcml["cpu_seconds"]
    return summary


def _cache(path, cache):
    """Seconds to convert ``path`` to the CSR cache and to load the cache (memory maps)."""
    begun = time.perf_counter()
    convert_svmlight(path, cache, n_features=N_FEATURES)
    converted = time.perf_counter()
    load_cache(cache)
    loaded = time.perf_counter()
    return {"convert_seconds": converted - begun, "load_seconds": loaded - converted}


def report(r):
    """The figures as Markdown."""
    load = r["load_average"]
    lines = [
        "Each figure: a fresh process importing the parser and loading the file, the file in "
        "the page cache (seconds: wall time; CPU seconds: of all its threads); median of "
        f"{len(r['files'][0]['parsers']['sparcml']['runs'])} "
        f"processes, parsers in turn. {r['cores']} cores, load average {load['start']:.1f} "
        f"at the start and {load['end']:.1f} at the end; sparcml with NUMBA_NUM_THREADS="
        f"{r['threads']} unless said.",
        "",
        "| file | MB | rows | nonzeros | parser | seconds | rows/s | MB/s | sparcml faster | "
        "CPU seconds | sparcml's CPU less | same matrix as scikit-learn |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in r["files"]:
        head = f"| {f['file']} | {f['megabytes']:.0f} | {f['rows']:,} | {f['nnz']:,}"
        for parser, figures in f["parsers"].items():
            if figures.get("missing"):
                lines.append(f"{head} | {PARSERS[parser]} | missing (not installed) | | | | | | |")
            else:
                same = "yes" if figures["identical"] else "NO"
                lines.append(
                    f"{head} | {PARSERS[parser]} {figures['version']} | {figures['seconds']:.2f} "
                    f"| {figures['rows_per_second']:,.0f} | {figures['megabytes_per_second']:.0f} "
                    f"| {figures['sparcml_faster']:.1f}x | {figures['cpu_seconds']:.2f} "
                    f"| {figures['sparcml_less_cpu']:.1f}x | {same} |"
                )
            head = "| | | |"
    lines.append("")
    for f in r["files"]:
        s = f["parsers"]["sparcml"]
        lines.append(
            f"- {f['file']}: sparcml's import {s['import_seconds']:.2f} s, first load "
            f"{s['load_seconds']:.2f} s, a second load in the same process "
            f"{s['again_seconds']:.2f} s: the first costs "
            f"{s['load_seconds'] - s['again_seconds']:.2f} s more "
            f"({s['load_cpu_seconds'] - s['again_cpu_seconds']:.2f} CPU seconds)"
        )
    cache = r["cache"]
    lines.append(
        f"- CSR cache of the 5-decimal file: conversion {cache['convert_seconds']:.2f} s, "
        f"loading it (memory maps) {cache['load_seconds'] * 1e3:.2f} ms"
    )
    return "\n".join(lines)
