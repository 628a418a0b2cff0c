"""Training throughput and accuracy against scikit-learn, batch sizes and ranks.

On url-like synthetic data (``make_url_like``: ~116 nonzeros a row, power-law column
popularity): rows per second and test accuracy of ``SparseSGDClassifier`` in this process
against scikit-learn's ``SGDClassifier`` for the same epochs; accuracy and time against the
batch size (in this process) and against the number of MPI ranks (under mpiexec).
"""

import time

from sklearn.linear_model import SGDClassifier

from ._output import add_out_argument, apply_quick, write
from .train import add_url_like_arguments, run_methods, url_like_options

QUICK = {"rows": 20_000, "test_rows": 5_000, "epochs": 2, "batch_sizes": [1, 16], "nprocs": [2]}


def add_arguments(parser):
    add_url_like_arguments(parser, rows=300_000, test_rows=60_000, epochs=5)
    parser.add_argument(
        "--loss", default="log_loss", choices=["log_loss", "hinge"], help="loss (default: log_loss)"
    )
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=[1, 16, 64, 256, 1024],
        help="rows per step for the batch-size sweep (default: 1 16 64 256 1024)",
    )
    parser.add_argument(
        "--nprocs",
        type=int,
        nargs="+",
        default=[1, 2, 4],
        help="ranks for the scaling runs, batch size 16 (default: 1 2 4)",
    )
    add_out_argument(parser)
    parser.add_argument(
        "--repeat", type=int, default=3, help="in-process fits timed, the least kept (default: 3)"
    )
    parser.add_argument("--quick", action="store_true", help="a small run of seconds")


def url_like_split(rows, test_rows, features):
    """Seeded url-like training and test sets."""
    from ..datasets import make_url_like

    X, y = make_url_like(rows + test_rows, n_features=features, random_state=0)
    return X[:rows], y[:rows], X[rows:], y[rows:]


def _timed_fit(model, X, y, repeat):
    """The least time of ``repeat`` fits (the model keeps the last; all are equal)."""
    best = float("inf")
    for _ in range(repeat):
        begin = time.perf_counter()
        model.fit(X, y)
        best = min(best, time.perf_counter() - begin)
    return best


def run(args):
    from .. import SparseSGDClassifier

    apply_quick(args, QUICK)
    X, y, Xt, yt = url_like_split(args.rows, args.test_rows, args.features)
    common = dict(loss=args.loss, max_iter=args.epochs, tol=None, random_state=0)
    SparseSGDClassifier(**common).fit(X[:100], y[:100])  # compile the kernels first
    records = []
    reference = SGDClassifier(**common)
    seconds = _timed_fit(reference, X, y, args.repeat)
    records.append(
        {
            "run": "scikit-learn SGDClassifier",
            "batch_size": 1,
            "nprocs": 1,
            "seconds": seconds,
            "rows_per_second": args.epochs * args.rows / seconds,
            "accuracy": reference.score(Xt, yt),
        }
    )
    for batch in args.batch_sizes:
        model = SparseSGDClassifier(batch_size=batch, **common)
        seconds = _timed_fit(model, X, y, args.repeat)
        records.append(
            {
                "run": "SparseSGDClassifier, in-process",
                "batch_size": batch,
                "nprocs": 1,
                "seconds": seconds,
                "rows_per_second": args.epochs * args.rows / seconds,
                "accuracy": model.score(Xt, yt),
            }
        )
    options = url_like_options(args, batch_size=16, loss=args.loss)
    for nprocs in args.nprocs:
        (record,) = run_methods(nprocs, {"exact": {}}, options)
        last = record["epochs"][-1]
        records.append(
            {
                "run": "SparseSGDClassifier, mpiexec",
                "batch_size": 16,
                "nprocs": nprocs,
                "seconds": last["seconds"],
                "rows_per_second": args.epochs * args.rows / last["seconds"],
                "accuracy": last["accuracy"],
                "bytes_sent_per_rank": last["bytes_sent"],
                "dense_bytes_per_rank": last["dense_bytes"],
            }
        )
    baseline = records[0]["rows_per_second"]
    text = table(records, baseline)
    print(text)
    write(args.out, "throughput", records, text)
    return 0


def table(records, baseline):
    """The records as a Markdown table; speed relative to scikit-learn's."""
    lines = [
        "| run | ranks | batch/rank | seconds | rows/s | vs scikit-learn | test accuracy | "
        "MB sent/rank | dense MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        sent = r.get("bytes_sent_per_rank")
        dense = r.get("dense_bytes_per_rank")
        lines.append(
            f"| {r['run']} | {r['nprocs']} | {r['batch_size']} | {r['seconds']:.2f} "
            f"| {r['rows_per_second']:,.0f} | {r['rows_per_second'] / baseline:.2f}x "
            f"| {r['accuracy']:.4f} | {'' if sent is None else f'{sent / 1e6:.1f}'} "
            f"| {'' if dense is None else f'{dense / 1e6:.0f}'} |"
        )
    return "\n".join(lines)
