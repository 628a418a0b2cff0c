"""``n_jobs`` end to end: a pool's first fit and its next, against a fit in this process.

``make_url_like(--generated, random_state=0)``: the first ``--rows`` rows train, the rest
test. ``SparseSGDClassifier(random_state=0)`` with every other option at its default
fits them ``--repeats`` times each way, timed from the call to ``fit`` until it returns:
in this process (``n_jobs=None``), with ``n_jobs=1`` (also in this process), and for
each ``--nprocs`` N with ``n_jobs=N`` twice, the first fit on a new pool (its workers
start within it) and the second on the same workers. A small fit first loads this
process's kernels (on a new machine: compiles them). Prints the medians, each
``n_jobs=N`` fit against ``n_jobs=1`` (also repeat by repeat: the ways of a repeat run in
turn, on the same state of the machine), where the seconds of the fits on a pool go
(:attr:`sparcml_apps.jobs.Pool.timings`), and the machine's load average (other work
skews every figure).

Then, on a new pool of the first ``--nprocs``, ``GridSearchCV`` over ``alpha`` (1e-5 and
1e-4, 3 folds, no refit) fits 6 times; each fit is timed as the others, and its training
(from every worker about to train until the model is back) told from the rest.
"""

import os
import statistics
import time

from sklearn.model_selection import GridSearchCV

from .. import jobs
from ..datasets import make_url_like
from ..estimators import SparseSGDClassifier
from ._output import add_out_argument, apply_quick, write
from ._warm import held_out_fit

STAGES = ("checked", "packed", "started", "shipped", "first_step", "fitted", "total")
QUICK = {"generated": 25_000, "rows": 20_000, "repeats": 1, "nprocs": [2]}


def add_arguments(parser):
    parser.add_argument(
        "--generated", type=int, default=500_000, help="url-like rows made (default: 500000)"
    )
    parser.add_argument(
        "--rows", type=int, default=400_000, help="of those, rows to train (default: 400000)"
    )
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[2], help="values of n_jobs (default: 2)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="fits each way (default: 3)")
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a small run of seconds")


def run(args):
    apply_quick(args, QUICK)
    X, y = make_url_like(args.generated, random_state=0)
    X, y, X_test, y_test = X[: args.rows], y[: args.rows], X[args.rows :], y[args.rows :]
    print(f"url-like: {X.shape[0]:,} rows to train, {X_test.shape[0]:,} to test, "
          f"{X.shape[1]:,} columns, {X.nnz:,} nonzeros")  # fmt: skip
    held_out_fit(X, y, random_state=0)
    records = []

    def timed(way, n_jobs, repeat):
        model = SparseSGDClassifier(random_state=0, n_jobs=n_jobs)
        begin = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - begin
        timings = dict(jobs.pool(n_jobs).timings) if n_jobs and n_jobs > 1 else {}
        record = {
            "way": way, "n_jobs": n_jobs, "repeat": repeat, "rows": X.shape[0],
            "seconds": seconds, "epochs": model.n_iter_,
            "accuracy": model.score(X_test, y_test), "stages": timings,
            "load": os.getloadavg()[0],
        }  # fmt: skip
        print({k: v for k, v in record.items() if k != "stages"} | _rounded(timings))
        records.append(record)

    for repeat in range(args.repeats):
        timed("in-process", None, repeat)
        timed("n_jobs=1", 1, repeat)
        for n in args.nprocs:
            jobs.close()  # a new pool: its first fit starts it
            timed("first fit", n, repeat)
            timed("second fit", n, repeat)
        jobs.close()
    searched = search(X, y, args.nprocs[0])
    text = table(records) + "\n\n" + search_table(searched)
    print(text)
    write(args.out, "jobs", records + searched, text)
    return 0


class _Timed(SparseSGDClassifier):
    """The classifier; each fit's seconds and pool stages go into ``FITS``."""

    FITS = []

    def fit(self, X, y, **kwargs):
        begin = time.perf_counter()
        super().fit(X, y, **kwargs)
        stages = dict(jobs.pool(self.n_jobs).timings)
        self.FITS.append({"seconds": time.perf_counter() - begin, "stages": stages})
        return self


def search(X, y, n):
    """The fits of a grid search of ``n_jobs=n`` on a new pool, in order: records."""
    jobs.close()
    _Timed.FITS.clear()
    grid = GridSearchCV(
        _Timed(random_state=0, n_jobs=n), {"alpha": [1e-5, 1e-4]}, cv=3, refit=False
    )
    grid.fit(X, y)
    jobs.close()
    records = [
        {"way": "grid search", "n_jobs": n, "fit": i, "rows": X.shape[0] * 2 // 3} | fit
        for i, fit in enumerate(_Timed.FITS, 1)
    ]
    for record in records:
        print({k: v for k, v in record.items() if k != "stages"} | _rounded(record["stages"]))
    return records


def search_table(records):
    """Each fit of the grid search: seconds, its training, and the rest."""
    lines = [
        f"GridSearchCV(SparseSGDClassifier(n_jobs={records[0]['n_jobs']}), alpha 1e-5 and "
        "1e-4, cv=3), a new pool:",
        "",
        "| fit | fit s | training s | the rest s |",
        "|---|---|---|---|",
    ]
    rest = []
    for record in records:
        stages = record["stages"]
        training = stages["fitted"] - stages["first_step"]
        rest.append(record["seconds"] - training)
        lines.append(
            f"| {record['fit']} | {record['seconds']:.2f} | {training:.2f} | {rest[-1]:.2f} |"
        )
    low, high = f"{min(rest[1:]):.2f}", f"{max(rest[1:]):.2f}"
    spent = low if low == high else f"{low} to {high}"
    lines += [
        "",
        f"The fits after the first spend {spent} s besides training (planning, copying "
        "the rows, sending the plans, the model back).",
    ]
    return "\n".join(lines)


def _paired(records, way, n):
    """The ratios of ``way`` to ``n_jobs=1`` repeat by repeat: their range."""
    ones = {r["repeat"]: r["seconds"] for r in records if r["way"] == "n_jobs=1"}
    ratios = [
        r["seconds"] / ones[r["repeat"]] for r in records if (r["way"], r["n_jobs"]) == (way, n)
    ]
    return f"{min(ratios):.2f}x to {max(ratios):.2f}x repeat by repeat"


def _rounded(stages):
    return {stage: round(stages[stage], 2) for stage in STAGES if stage in stages}


def table(records):
    """The medians over repeats, one row each way, as a Markdown table: seconds, against
    ``n_jobs=1``, epochs, test accuracy, and the stages of the fits on a pool."""
    one = statistics.median(r["seconds"] for r in records if r["way"] == "n_jobs=1")
    lines = [
        "| fit | n_jobs | fit s | against n_jobs=1 | epochs | accuracy | "
        + " | ".join(f"{stage} s" for stage in STAGES[:-1])
        + " |",
        "|---|---|---|---|---|---|" + "---|" * (len(STAGES) - 1),
    ]
    ways = dict.fromkeys((r["way"], r["n_jobs"]) for r in records)
    for way, n_jobs in ways:
        mine = [r for r in records if (r["way"], r["n_jobs"]) == (way, n_jobs)]
        seconds = statistics.median(r["seconds"] for r in mine)
        cells = [
            way, str(n_jobs), f"{seconds:.2f}", f"{seconds / one:.2f}x",
            f"{statistics.median(r['epochs'] for r in mine):g}",
            f"{statistics.median(r['accuracy'] for r in mine):.4f}",
        ]  # fmt: skip
        for stage in STAGES[:-1]:
            found = [r["stages"][stage] for r in mine if stage in r["stages"]]
            cells.append(f"{statistics.median(found):.2f}" if found else "")
        lines.append("| " + " | ".join(cells) + " |")
    ratio = {
        key: statistics.median(r["seconds"] for r in records if (r["way"], r["n_jobs"]) == key)
        / one
        for key in ways
    }
    pools = "; ".join(
        f"n_jobs={n}: first fit {ratio['first fit', n]:.2f}x ({_paired(records, 'first fit', n)}), "
        f"second {ratio['second fit', n]:.2f}x ({_paired(records, 'second fit', n)})"
        for way, n in ways
        if way == "first fit"
    )
    loads = [r["load"] for r in records]
    lines += [
        "",
        f"Against n_jobs=1: {pools}; n_jobs=1 against in-process "
        f"{1 / ratio['in-process', None]:.2f}x (load average {min(loads):.1f} to "
        f"{max(loads):.1f})",
    ]
    return "\n".join(lines)
