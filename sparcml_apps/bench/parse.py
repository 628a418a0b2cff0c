"""LIBSVM parse speed against scikit-learn's load_svmlight_file, on a url-like file.

Writes a LIBSVM file of url-like rows (``make_url_like``, saved with scikit-learn's
``dump_svmlight_file``), then times, each once on the same file: the sparcml parser
(``load_svmlight``), ``sklearn.datasets.load_svmlight_file``, the conversion to the CSR
cache (``convert_svmlight``) and loading that cache (``load_cache``: memory maps), and
checks that both parsers give the same matrix.
"""

import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from sparcml_apps.datasets import convert_svmlight, load_cache, load_svmlight, make_url_like

from ._output import add_out_argument, write

N_FEATURES = 3231961
QUICK_MEGABYTES = 20


def add_arguments(parser):
    parser.add_argument(
        "--megabytes", type=float, default=200, help="size of the file to parse (default: 200)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a {QUICK_MEGABYTES} MB file instead, for a smoke test (default: off)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        help="where to write the file and cache; a file made before is reused "
        "(default: a temporary directory, removed at the end)",
    )
    parser.add_argument("--seed", type=int, default=0, help="make_url_like seed (default: 0)")
    add_out_argument(parser)


def run(args):
    megabytes = QUICK_MEGABYTES if args.quick else args.megabytes
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        return _measure(args.dir, megabytes, args.seed, args.out)
    with tempfile.TemporaryDirectory(prefix="sparcml-bench-parse-") as folder:
        return _measure(Path(folder), megabytes, args.seed, args.out)


def _measure(folder, megabytes, seed, out):
    path = _url_like_file(folder, megabytes, seed)
    size = path.stat().st_size / 1e6
    load_svmlight(_tiny_file(folder))  # compile (or load) the kernels outside the timings

    seconds, (X, y) = _timed(load_svmlight, path, n_features=N_FEATURES)
    results = {
        "file": str(path),
        "megabytes": round(size, 1),
        "rows": X.shape[0],
        "nnz": int(X.nnz),
        "sparcml_seconds": seconds,
    }
    seconds, (X_ref, y_ref) = _timed(
        load_svmlight_file, str(path), n_features=N_FEATURES, zero_based=False
    )
    results["sklearn_seconds"] = seconds
    results["identical"] = bool(
        np.array_equal(X.indptr, X_ref.indptr)
        and np.array_equal(X.indices, X_ref.indices)
        and np.array_equal(X.data, X_ref.data)
        and np.array_equal(y, y_ref)
    )
    del X, y, X_ref, y_ref
    results["cache_convert_seconds"], _ = _timed(
        convert_svmlight, path, folder / "cache", n_features=N_FEATURES
    )
    results["cache_load_seconds"], (X, _) = _timed(load_cache, folder / "cache")
    results["cache_first_pass_seconds"], _ = _timed(np.sum, X.data)
    for name in ("sparcml", "sklearn"):
        results[f"{name}_rows_per_second"] = results["rows"] / results[f"{name}_seconds"]
        results[f"{name}_megabytes_per_second"] = size / results[f"{name}_seconds"]
    results["speedup"] = results["sklearn_seconds"] / results["sparcml_seconds"]
    text = report(results)
    print(text)
    write(out, "parse", results, text)
    return 0


def _url_like_file(folder, megabytes, seed):
    """A url-like LIBSVM file of at least ``megabytes`` MB in ``folder`` (reused if there)."""
    path = folder / f"url-like-{megabytes:g}MB-seed{seed}.svm"
    if path.exists() and path.stat().st_size >= megabytes * 1e6:
        return path
    sample = folder / "sample.svm"
    dump_svmlight_file(*make_url_like(2000, random_state=seed), str(sample), zero_based=False)
    rows = int(megabytes * 1e6 / (sample.stat().st_size / 2000) * 1.03) + 1
    sample.unlink()
    while True:
        print(f"writing {rows:,} url-like rows to {path} ...", flush=True)
        X, y = make_url_like(rows, random_state=seed)
        dump_svmlight_file(X, y, str(path), zero_based=False)
        if path.stat().st_size >= megabytes * 1e6:
            return path
        rows = int(rows * 1.05) + 1


def _tiny_file(folder):
    path = folder / "tiny.svm"
    path.write_text("1 1:0.5 3:1\n-1 2:1e-3\n")
    return path


def _timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def report(r):
    """The figures as Markdown."""
    lines = [
        f"{r['megabytes']:.1f} MB url-like LIBSVM file, {r['rows']:,} rows, {r['nnz']:,} nonzeros",
        "",
        "| parser | seconds | rows/s | MB/s |",
        "|---|---|---|---|",
    ]
    for name, label in (
        ("sparcml", "sparcml `load_svmlight`"),
        ("sklearn", "scikit-learn `load_svmlight_file`"),
    ):
        lines.append(
            f"| {label} | {r[f'{name}_seconds']:.2f} | {r[f'{name}_rows_per_second']:,.0f} "
            f"| {r[f'{name}_megabytes_per_second']:.1f} |"
        )
    lines += [
        "",
        f"speedup {r['speedup']:.2f}x; the same matrix and labels: {r['identical']}; "
        f"cache conversion {r['cache_convert_seconds']:.2f} s; cache load (memory map) "
        f"{r['cache_load_seconds'] * 1e3:.2f} ms; first pass over the mapped values "
        f"{r['cache_first_pass_seconds']:.2f} s",
    ]
    return "\n".join(lines)
