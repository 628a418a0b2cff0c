"""Where fits with every default stop on P ranks: the epochs and accuracy of 1, 2, 4, 8 ranks.

For every dataset (the synthetic generators, and LIBSVM files ``TRAIN[,TEST]``), loss
(hinge and log_loss), number of ranks P of ``--ranks`` and seed, ``SparseSGDClassifier``
with every default (``max_iter``, ``tol``, ``early_stopping`` included) fits on P ranks,
each holding a contiguous block of the training rows, and is scored on the test rows; on
one rank scikit-learn's ``SGDClassifier`` fits with its defaults too. A seed's fits on
every P run one after the other (an ``mpiexec`` job each), so that they share the state
of the machine. The epochs a fit runs do not depend on the cores, so P may exceed them
(the ranks then take turns: the seconds are recorded but not reported). Writes JSON and a
Markdown table: for every dataset, loss and P, the mean epochs (and their range over the
seeds), the mean test accuracy, and against one rank the mean difference in epochs, the
largest of a seed, the difference in accuracy and the mean of the seeds' ratios of
seconds; scikit-learn's beside.
"""

import itertools
import json
import tempfile

import numpy as np

from .. import _mpiexec
from . import _peer_data
from ._many_core import cores
from ._output import add_out_argument, apply_quick, write
from .scaling import RANKS_MODULE, add_data_arguments, prepare

LOSSES = ("hinge", "log_loss")
QUICK = {"rows": 20_000, "features": 100_000, "ranks": [1, 2], "seeds": 2}


def add_arguments(parser):
    add_data_arguments(parser)
    parser.add_argument(
        "--ranks", type=int, nargs="+", default=[1, 2, 4, 8], help="P (default: 1 2 4 8)"
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds a cell (default: 3)")
    parser.add_argument(
        "--losses", nargs="+", default=list(LOSSES), choices=LOSSES, help="(default: both)"
    )
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a small grid of a minute")


def fits(stems, nprocs, loss, seeds):
    """The default fits of ``loss`` on ``nprocs`` ranks, a record a seed of ``seeds`` (and
    system)."""
    options = ["--train", stems[0], "--test", stems[1], "--epochs", 1, "--loss", loss,
               "--seeds", *seeds, "--defaults", "--no-curve"]  # fmt: skip
    if nprocs == 1:
        options.append("--scikit-learn")
    done = _mpiexec.run_module(nprocs, RANKS_MODULE, [str(o) for o in options], timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"the default fits failed on {nprocs} ranks:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def run(args):
    apply_quick(args, QUICK)
    if 1 not in args.ranks:
        args.ranks = [1, *args.ranks]
    for spec in args.datasets:  # a dataset that cannot be read fails before any run
        _peer_data.check(spec)
    records = []
    with tempfile.TemporaryDirectory(prefix="sparcml-stopping-") as folder:
        for spec in args.datasets:
            print(f"writing the rows of {spec} ...", flush=True)
            name, stems, _ = prepare(spec, folder, args)
            for loss, seed, nprocs in itertools.product(
                args.losses, range(args.seeds), sorted(args.ranks)
            ):  # a seed's fits on every P in turn: the machine's state shared by them
                for record in fits(stems, nprocs, loss, [seed]):
                    record["dataset"] = name
                    records.append(record)
                    done = record["defaults"]
                    print(f"{name} {loss} P={nprocs} {record['system']} seed "
                          f"{record['seed']}: {done['epochs']} epochs, accuracy "
                          f"{done['accuracy']:.4f}, {done['seconds']:.2f} s",
                          flush=True)  # fmt: skip
    summary = summarize(records)
    text = report(summary, args.seeds, cores())
    print(f"\n{text}")
    write(args.out, "stopping", {"records": records, "summary": summary}, text)
    return 0


def summarize(records):
    """One row a dataset, loss, system and P: epochs and accuracy over the seeds, and
    sparcml's against one rank of the same seeds."""
    cells = {}
    for r in records:
        cells.setdefault((r["dataset"], r["loss"], r["system"], r["nprocs"]), []).append(r)
    rows = []
    for (dataset, loss, system, nprocs), runs in cells.items():
        runs = sorted(runs, key=lambda r: r["seed"])
        one = {r["seed"]: r["defaults"] for r in cells.get((dataset, loss, "sparcml", 1), [])}
        epochs = np.array([r["defaults"]["epochs"] for r in runs])
        accuracy = np.array([r["defaults"]["accuracy"] for r in runs])
        row = {
            "dataset": dataset, "loss": loss, "system": system, "nprocs": nprocs,
            "seeds": len(runs), "epochs": float(epochs.mean()), "epochs_min": int(epochs.min()),
            "epochs_max": int(epochs.max()), "accuracy": float(accuracy.mean()),
            "seconds": float(np.mean([r["defaults"]["seconds"] for r in runs])),
        }  # fmt: skip
        if system == "sparcml" and all(r["seed"] in one for r in runs):
            more = epochs - np.array([one[r["seed"]]["epochs"] for r in runs])
            row["more_epochs"] = float(more.mean())
            row["most_more_epochs"] = int(more.max())
            row["accuracy_gap"] = float(
                accuracy.mean() - np.mean([one[r["seed"]]["accuracy"] for r in runs])
            )
            ratios = [r["defaults"]["seconds"] / one[r["seed"]]["seconds"] for r in runs]
            row["seconds_ratio"] = float(np.mean(ratios))
        rows.append(row)
    return rows


def report(rows, seeds, n_cores):
    """The rows as one Markdown table; seconds where the ranks had a core each."""
    lines = [
        f"Fits with every default; means over {seeds} seeds, on {n_cores} cores (seconds "
        "only where every rank had a core). Against one rank: epochs more than one rank's "
        "fit of the same seed (mean; the most of a seed), accuracy (points) and seconds "
        "(the mean of the seeds' ratios; a seed's fits run one after the other).",
        "",
        "| dataset | loss | system | P | epochs (range) | accuracy | seconds "
        "| against 1 rank: epochs | accuracy | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        timed = row["nprocs"] <= n_cores
        against = ["", "", ""]
        if "more_epochs" in row and row["nprocs"] > 1:
            against = [
                f"{row['more_epochs']:+.1f} ({row['most_more_epochs']:+d})",
                f"{row['accuracy_gap'] * 100:+.2f}",
                f"{row['seconds_ratio']:.2f}x" if timed else "",
            ]
        seconds = f"{row['seconds']:.2f}" if timed else ""
        lines.append(
            f"| {row['dataset']} | {row['loss']} | {row['system']} | {row['nprocs']} "
            f"| {row['epochs']:.1f} ({row['epochs_min']}-{row['epochs_max']}) "
            f"| {row['accuracy']:.4f} | {seconds} | {' | '.join(against)} |"
        )
    return "\n".join(lines)
