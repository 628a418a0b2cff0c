"""Project the alpha-beta cost model to large clusters at the sizes of real datasets.

For P from 2 to 1024 ranks, each algorithm's predicted time (and bytes sent per rank) of
one training step's allreduce, at the dimensions of url, webspam (trigrams) and kdd2012:
every rank holds ``batch_size`` rows' worth of nonzeros (an upper bound: popular columns
repeat across rows). The constants are the cost model's (calibrated, or given here).

Then the time to a target accuracy with default options on 1 to 1024 ranks at the same
shapes, over the network of those constants and over 10 Gbit/s (:mod:`._time_to_target`),
and, where ``sparcml bench scaling`` has measured them, its predictions of an epoch on 2
and 4 ranks beside the measured ones.
"""

import json
import os

from collectives import ALGORITHMS, cost_model

from .._paths import option, readable_file
from . import _time_to_target as time_to_target
from ._output import add_out_argument, apply_quick, draw, write

# columns and mean nonzeros a row, from the LIBSVM datasets page
DATASETS = {
    "url": (3_231_961, 116),
    "webspam-trigram": (16_609_143, 3_728),
    "kdd2012": (54_686_452, 11),
}


def add_arguments(parser):
    parser.add_argument(
        "--calibration",
        type=option(readable_file),
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
    parser.add_argument(
        "--scaling",
        type=option(readable_file),
        help="the JSON of `sparcml bench scaling` to take the epochs to target and the "
        "measured epochs from (default: scaling.json in --out, when there is one)",
    )
    parser.add_argument(
        "--measured-nonzeros",
        type=int,
        default=time_to_target.MEASURED_NONZEROS,
        help="nonzeros of the rows generated for each shape to measure the growth of the "
        f"columns and the seconds of a step (default: {time_to_target.MEASURED_NONZEROS})",
    )
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="fewer rows measured")


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


TEN_GBIT = 8e-10
"""Seconds a byte at 10 Gbit/s."""


def networks(args):
    """``{name: constants}``: the given or calibrated ones, and the same at 10 Gbit/s."""
    mine = {"alpha": args.alpha, "beta": args.beta, "gamma": args.gamma}
    found = {f"{8 / args.beta / 1e9:.3g} Gbit/s": mine}
    found.setdefault("10 Gbit/s", {**mine, "beta": TEN_GBIT})
    return found


def targets(args):
    """The time-to-target records: every shape, network and P; and the checks against
    what the scaling benchmark measured."""
    scaling_path = args.scaling or args.out / "scaling.json"
    scaling = json.loads(scaling_path.read_text()) if scaling_path.is_file() else None
    epochs = time_to_target.epochs_to_target(scaling) if scaling else {}
    nprocs_list = [1 << i for i in range(args.max_nprocs.bit_length())]
    records, measured = [], {}
    for shape, (_, n_features, nnz_per_row) in time_to_target.SHAPES.items():
        X, y, lengths, columns = time_to_target.growth(
            n_features, nnz_per_row, args.measured_nonzeros
        )
        measured[shape] = lengths, columns, time_to_target.step_seconds(X, y)
        print(
            f"{shape}: {X.shape[0]} rows measured, {measured[shape][2] * 1e9:.1f} ns a "
            f"nonzero, {columns[-1]} columns in them",
            flush=True,
        )
        for network, constants in networks(args).items():
            for r in time_to_target.project(shape, measured[shape], constants, nprocs_list, epochs):
                records.append({"network": network, **r})
    return records, checks(scaling, measured["url"], args), epochs


def checks(scaling, measured, args):
    """The projection's epoch on the rows the scaling benchmark trained (url-like, url's
    shape) beside its measured epoch, over the same network, on 2 and 4 ranks sharing
    this machine's cores (as they did)."""
    if scaling is None:
        return []
    out = []
    names = {"1gbit": 1e9, "10gbit": 1e10}
    for s in scaling["summary"]:
        if (s["system"], s["dataset"]) != ("sparcml", "url-like") or s["network"] not in names:
            continue
        rows = next(r["rows"] for r in scaling["records"] if r["dataset"] == "url-like")
        beta = 8 / names[s["network"]]
        constants = {"alpha": args.alpha, "beta": beta, "gamma": args.gamma}
        shape = (rows, time_to_target.SHAPES["url"][1], time_to_target.SHAPES["url"][2])
        (r,) = time_to_target.project(
            shape, measured, constants, [s["nprocs"]], cores=os.cpu_count()
        )
        out.append({
            "network": s["network"], "nprocs": s["nprocs"], "rows": rows,
            "predicted_epoch_seconds": r["epoch_seconds"],
            "measured_epoch_seconds": s["seconds_per_epoch"],
            "predicted_mb_sent_per_epoch": r["mb_sent_per_epoch"],
            "measured_mb_sent_per_epoch": s["mb_sent_per_epoch"],
        })  # fmt: skip
    return out


def target_table(records, checks, epochs):
    lines = [
        "Epochs to target "
        + (
            ", ".join(f"{p} ranks {e:.2f}" for p, e in sorted(epochs.items()))
            + " (url-like, shared memory, measured); more ranks take the most measured's"
            if epochs
            else "not measured (no scaling.json): 1 on every P"
        ),
        "",
        "| shape | network | P | rows a rank | local steps | exchanges an epoch "
        "| MB a rank an epoch | steps (s) | exchanges (s) | time to target (s) | speedup |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['shape']} | {r['network']} | {r['nprocs']} | {r['rows_per_rank']} "
            f"| {r['local_steps']} | {r['exchanges_per_epoch']} | {r['mb_sent_per_epoch']:.3g} "
            f"| {r['compute_seconds']:.3g} | {r['exchange_seconds']:.3g} "
            f"| {r['time_to_target']:.3g} | {r['speedup']:.2f}x |"
        )
    if checks:
        lines += [
            "",
            "The projection against the scaling benchmark's url-like runs (seconds and MB "
            f"a rank an epoch; the ranks share {os.cpu_count()} cores, as they did there):",
            "",
            "| network | P | rows | predicted s | measured s | predicted MB | measured MB |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in checks:
            lines.append(
                f"| {c['network']} | {c['nprocs']} | {c['rows']} "
                f"| {c['predicted_epoch_seconds']:.3g} | {c['measured_epoch_seconds']:.3g} "
                f"| {c['predicted_mb_sent_per_epoch']:.3g} "
                f"| {c['measured_mb_sent_per_epoch']:.3g} |"
            )
    return "\n".join(lines)


def run(args):
    apply_quick(args, {"measured_nonzeros": 200_000})
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
    found, checked, epochs = targets(args)
    text = target_table(found, checked, epochs)
    print(text)
    write(args.out, "projection-target", {"records": found, "checks": checked}, text)
    draw("projection_target", found, args.out / "projection-target.png")
    return 0
