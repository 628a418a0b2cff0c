"""The TopK convergence diagnostics of training, against K and against steps.

On url-like data, ``SparseSGDClassifier(compression="topk", diagnostics=True)`` on P
ranks for each K (a fraction of the weights), with error feedback: per step, gamma (how
much of a rank's accumulated vector TopK leaves behind, the largest over the ranks) and
xi (how far the sum of the ranks' TopKs is from the TopK of their sum, relative to the
sum); and the test accuracy reached. The analysis of TopK with error feedback asks for
gamma < 1 and a bounded xi.
"""

import numpy as np

from ._output import add_out_argument, apply_quick, draw, write
from .train import ranks_options, run_methods

QUICK = {"rows": 10_000, "features": 100_000, "epochs": 1, "nprocs": 2, "topk": [1e-4, 1e-3, 1e-2]}


def add_arguments(parser):
    parser.add_argument(
        "--rows", type=int, default=50_000, help="url-like rows, train and test (default: 50000)"
    )
    parser.add_argument(
        "--features", type=int, default=1_000_000, help="url-like columns (default: 1000000)"
    )
    parser.add_argument("--epochs", type=int, default=2, help="epochs (default: 2)")
    parser.add_argument(
        "--batch-size", type=int, default=64, help="rows per rank a step (default: 64)"
    )
    parser.add_argument("--nprocs", type=int, default=4, help="ranks (default: 4)")
    parser.add_argument(
        "--topk",
        type=float,
        nargs="+",
        default=[0.00001, 0.0001, 0.001, 0.003, 0.01],
        help="K as fractions of the weights (default: 0.00001 0.0001 0.001 0.003 0.01)",
    )
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a small run of seconds")


def run(args):
    apply_quick(args, QUICK)
    options = ranks_options(
        rows=args.rows, features=args.features, epochs=args.epochs,
        batch_size=args.batch_size, loss="log_loss", test_fraction=0.2,
    )  # fmt: skip
    methods = {
        f"TopK {k:g}": {"compression": "topk", "topk": k, "diagnostics": True, "local_steps": 1}
        for k in args.topk
    }
    records = run_methods(args.nprocs, methods, options)
    for record, k in zip(records, args.topk, strict=True):
        record["topk"] = k
        record["gamma"] = [g for epoch in record["epochs"] for g in epoch.pop("gamma")]
        record["xi"] = [x for epoch in record["epochs"] for x in epoch.pop("xi")]
    text = table(records, args.features)
    print(text)
    write(args.out, "diagnostics", records, text)
    draw("diagnostics", records, args.out / "diagnostics.png")
    return 0


def table(records, n_weights):
    """Median and 90th percentile of gamma and xi over the steps, and the accuracy."""
    lines = [
        "| K (fraction) | K (entries) | gamma median | gamma p90 | xi median | xi p90 "
        "| test accuracy |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        gamma, xi = np.asarray(r["gamma"]), np.asarray(r["xi"])
        lines.append(
            f"| {r['topk']:g} | {max(1, round(r['topk'] * n_weights)):,} "
            f"| {np.median(gamma):.3f} | {np.quantile(gamma, 0.9):.3f} "
            f"| {np.median(xi):.3f} | {np.quantile(xi, 0.9):.3f} "
            f"| {r['epochs'][-1]['accuracy']:.4f} |"
        )
    return "\n".join(lines)
