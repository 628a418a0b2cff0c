"""Convergence and time of training with ``overlap`` and ``quantization_bits``.

On url-like data, ``SparseSGDClassifier`` under mpiexec, every option pair (overlap off/on,
exact/quantized values) for the same epochs and seed: seconds, training loss after every
epoch and test accuracy. ``overlap`` applies each step's sum one step late (the gradient of
a step misses the step before it), so its loss curve shows what the delay costs.
"""

import json
from pathlib import Path

from .._mpiexec import run_module

QUICK = {"rows": 20_000, "test_rows": 5_000, "epochs": 2, "nprocs": [2]}


def add_arguments(parser):
    parser.add_argument("--rows", type=int, default=200_000, help="training rows (default: 200000)")
    parser.add_argument("--test-rows", type=int, default=50_000, help="test rows (default: 50000)")
    parser.add_argument(
        "--features", type=int, default=3_231_961, help="columns, as url (default: 3231961)"
    )
    parser.add_argument("--epochs", type=int, default=5, help="epochs (default: 5)")
    parser.add_argument(
        "--batch-size", type=int, default=64, help="rows per rank a step (default: 64)"
    )
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[2, 4], help="numbers of ranks (default: 2 4)"
    )
    parser.add_argument(
        "--bits", type=int, default=4, help="quantization_bits of the quantized runs (default: 4)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=Path("results/overlap.json"),
        help="where to write the records (default: results/overlap.json)",
    )
    parser.add_argument("--quick", action="store_true", help="a small run of seconds")


def run(args):
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    records = []
    for nprocs in args.nprocs:
        for overlap in (False, True):
            for bits in (None, args.bits):
                options = ["--rows", args.rows, "--test-rows", args.test_rows, "--features",
                           args.features, "--epochs", args.epochs, "--batch-size",
                           args.batch_size, "--loss", "log_loss"]  # fmt: skip
                options += ["--overlap"] * overlap
                options += ["--quantization-bits", bits] if bits else []
                done = run_module(nprocs, "sparcml_apps.bench._train_ranks", options)
                if done.returncode != 0:
                    raise RuntimeError(f"training on {nprocs} ranks failed:\n{done.stderr}")
                records.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(table(records))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(records, indent=1))
    print(f"\nwrote {args.json}")
    return 0


def table(records):
    """The records as a Markdown table."""
    lines = [
        "| ranks | overlap | bits | seconds | loss after each epoch | test accuracy "
        "| MB sent/rank |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        losses = " ".join(f"{loss:.4f}" for loss in r["epoch_losses"])
        lines.append(
            f"| {r['nprocs']} | {'yes' if r['overlap'] else 'no'} "
            f"| {r['quantization_bits'] or 'exact'} | {r['seconds']:.2f} | {losses} "
            f"| {r['accuracy']:.4f} | {r['bytes_sent_per_rank'] / 1e6:.1f} |"
        )
    return "\n".join(lines)
