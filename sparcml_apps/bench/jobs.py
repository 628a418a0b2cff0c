"""Start-up of ``n_jobs`` fits: the seconds from ``fit`` to the workers' first step.

On url-like data, ``SparseSGDClassifier(n_jobs=N)`` fits ``--repeats`` times for
``--epochs`` epochs; each fit records the seconds from the call until every worker has
connected (started), every block of rows has been sent (shipped), every worker is about
to train (first step), and the fitted state is back (fitted), and the whole fit. Prints
the medians, with the share of the fit spent before the first step.
"""

import statistics

import numpy as np

from ..datasets import make_url_like
from ..estimators import SparseSGDClassifier
from ..jobs import fit
from ._output import add_out_argument, apply_quick, write

STAGES = ("started", "shipped", "first_step", "fitted", "total")
QUICK = {"rows": 20_000, "epochs": 1, "repeats": 1, "nprocs": [2]}


def add_arguments(parser):
    parser.add_argument("--rows", type=int, default=200_000, help="rows (default: 200000)")
    parser.add_argument(
        "--features", type=int, default=3_231_961, help="columns, as url (default: 3231961)"
    )
    parser.add_argument("--epochs", type=int, default=5, help="epochs a fit (default: 5)")
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[2], help="values of n_jobs (default: 2)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="fits each (default: 3)")
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a small run of seconds")


def run(args):
    apply_quick(args, QUICK)
    X, y = make_url_like(args.rows, args.features, random_state=0)
    megabytes = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 1e6
    print(f"url-like: {X.shape[0]:,} rows, {X.shape[1]:,} columns, {X.nnz:,} nonzeros, "
          f"{megabytes:.0f} MB")  # fmt: skip
    records = []
    for nprocs in args.nprocs:
        for repeat in range(args.repeats):
            model = SparseSGDClassifier(
                loss="log_loss", max_iter=args.epochs, tol=None, random_state=0, n_jobs=nprocs
            )
            timings = {}
            fit(model, "fit", X, y, timings=timings)
            records.append(
                {"nprocs": nprocs, "repeat": repeat, "rows": X.shape[0], "megabytes": megabytes,
                 "epochs": args.epochs, **timings}
            )  # fmt: skip
            print({key: round(value, 2) for key, value in timings.items()}, flush=True)
    text = table(records)
    print(text)
    write(args.out, "jobs", records, text)
    return 0


def table(records):
    """The medians over repeats, one row per ``n_jobs``, as a Markdown table."""
    lines = [
        "| n_jobs | rows | MB of X | epochs | started s | shipped s | first step s | fitted s "
        "| fit s | before first step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for nprocs in dict.fromkeys(r["nprocs"] for r in records):
        mine = [r for r in records if r["nprocs"] == nprocs]
        median = {stage: statistics.median(r[stage] for r in mine) for stage in STAGES}
        share = np.median([r["first_step"] / r["total"] for r in mine])
        cells = " | ".join(f"{median[stage]:.2f}" for stage in STAGES)
        lines.append(
            f"| {nprocs} | {mine[0]['rows']:,} | {mine[0]['megabytes']:.0f} | "
            f"{mine[0]['epochs']} | {cells} | {share:.1%} |"
        )
    return "\n".join(lines)
