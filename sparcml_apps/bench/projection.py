"""Project the alpha-beta cost model to large clusters at the sizes of real datasets.

For P from 2 to 1024 ranks, each algorithm's predicted time (and bytes sent per rank) of
one training step's allreduce, at the dimensions of url, webspam (trigrams) and kdd2012:
every rank holds ``batch_size`` rows' worth of nonzeros (an upper bound: popular columns
repeat across rows). The constants are the cost model's (calibrated, or given here).
"""

import json
from pathlib import Path

from collectives import ALGORITHMS, cost_model

from ._output import add_out_argument, draw, write

# columns and mean nonzeros a row, from the LIBSVM datasets page
DATASETS = {
    "url": (3_231_961, 116),
    "webspam-trigram": (16_609_143, 3_728),
    "kdd2012": (54_686_452, 11),
}


def add_arguments(parser):
    parser.add_argument(
        "--calibration",
        type=Path,
        help="take alpha, beta and gamma from this calibration file (its record of the most "
        "ranks; see the calibrate benchmark), unless given below",
    )
    parser.add_argument(
        "--alpha", type=float, help=f"seconds a message (default: {cost_model.ALPHA})"
    )
    parser.add_argument("--beta", type=float, help=f"seconds a byte (default: {cost_model.BETA})")
    parser.add_argument(
        "--gamma", type=float, help=f"seconds a merged entry (default: {cost_model.GAMMA})"
    )
    parser.add_argument(
        "--batch-size", type=int, default=16, help="rows per rank per step (default: 16)"
    )
    parser.add_argument(
        "--max-nprocs", type=int, default=1024, help="largest number of ranks (default: 1024)"
    )
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="the same; it takes a second")


def project(*, alpha, beta, gamma, batch_size, max_nprocs):
    """The predictions: one record per dataset, P and algorithm."""
    records = []
    nprocs = 2
    while nprocs <= max_nprocs:
        for dataset, (size, per_row) in DATASETS.items():
            nnz = min(size, batch_size * per_row)
            for name in ALGORITHMS:
                predicted = cost_model.predict(
                    name, nprocs, size, nnz, alpha=alpha, beta=beta, gamma=gamma
                )
                records.append(
                    {
                        "dataset": dataset,
                        "size": size,
                        "nnz_per_rank": nnz,
                        "nprocs": nprocs,
                        "algorithm": name,
                        "seconds": predicted.seconds,
                        "bytes_sent": predicted.bytes_sent,
                    }
                )
        nprocs *= 2
    return records


def table(records):
    """Markdown: the predicted step time of each algorithm, a row per dataset and P."""
    header = "| dataset | P | " + " | ".join(ALGORITHMS) + " | dense / best sparse |"
    lines = [header, "|---|---|" + "---|" * (len(ALGORITHMS) + 1)]
    rows = {}
    for r in records:
        rows.setdefault((r["dataset"], r["nprocs"]), {})[r["algorithm"]] = r["seconds"]
    for (dataset, nprocs), seconds in rows.items():
        best_sparse = min(v for k, v in seconds.items() if k != "dense")
        cells = " | ".join(f"{seconds[name] * 1e3:.3g} ms" for name in ALGORITHMS)
        lines.append(f"| {dataset} | {nprocs} | {cells} | {seconds['dense'] / best_sparse:.0f}x |")
    return "\n".join(lines)


def constants(args):
    """alpha, beta and gamma: given, else calibrated (``--calibration``), else the model's;
    and where they came from."""
    stored, source = {}, "the cost model's defaults"
    if args.calibration is not None:
        records = json.loads(args.calibration.read_text())
        most = max(records, key=int)
        stored = cost_model.stored(int(most), args.calibration)
        source = f"calibrated on {most} ranks ({args.calibration})"
    defaults = {"alpha": cost_model.ALPHA, "beta": cost_model.BETA, "gamma": cost_model.GAMMA}
    for name, default in defaults.items():
        if getattr(args, name) is None:
            value = stored.get(name)
            setattr(args, name, default if value is None else value)
    return source


def run(args):
    source = constants(args)
    records = project(
        alpha=args.alpha,
        beta=args.beta,
        gamma=args.gamma,
        batch_size=args.batch_size,
        max_nprocs=args.max_nprocs,
    )
    text = (
        f"alpha {args.alpha:g} s, beta {args.beta:g} s/byte, gamma {args.gamma:g} s/entry "
        f"({source}); {args.batch_size} rows per rank a step\n\n{table(records)}"
    )
    print(text)
    write(args.out, "projection", records, text)
    draw("projection", records, args.out / "projection.png")
    return 0
