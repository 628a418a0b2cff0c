"""Convergence and time of training with ``overlap`` and ``quantization_bits``.

On url-like data, ``SparseSGDClassifier`` under mpiexec, every option pair (overlap off/on,
exact/quantized values) for the same epochs and seed: seconds, training loss after every
epoch and test accuracy. ``overlap`` applies each step's sum one step late (the gradient of
a step misses the step before it), so its loss curve shows what the delay costs.
"""

from ._output import add_out_argument, apply_quick, write
from .train import (
    add_local_steps_argument,
    add_url_like_arguments,
    run_methods,
    url_like_options,
    with_local_steps,
)

QUICK = {"rows": 20_000, "test_rows": 5_000, "epochs": 2, "nprocs": [2]}


def add_arguments(parser):
    add_url_like_arguments(parser, rows=200_000, test_rows=50_000, epochs=5)
    parser.add_argument(
        "--batch-size", type=int, default=64, help="rows per rank a step (default: 64)"
    )
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[2, 4], help="numbers of ranks (default: 2 4)"
    )
    parser.add_argument(
        "--bits", type=int, default=4, help="quantization_bits of the quantized runs (default: 4)"
    )
    add_local_steps_argument(parser)
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a small run of seconds")


def run(args):
    apply_quick(args, QUICK)
    options = url_like_options(args, batch_size=args.batch_size, loss="log_loss")
    methods = {
        f"overlap {overlap}, bits {bits}": with_local_steps(
            {"overlap": overlap, "quantization_bits": bits}, args.local_steps
        )
        for overlap in (False, True)
        for bits in (None, args.bits)
    }
    records = []
    for nprocs in args.nprocs:
        records += run_methods(nprocs, methods, options)
    text = table(records)
    print(text)
    write(args.out, "overlap", records, text)
    return 0


def table(records):
    """The records as a Markdown table."""
    lines = [
        "| ranks | overlap | bits | seconds | loss after each epoch | test accuracy "
        "| MB sent/rank |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        last = r["epochs"][-1]
        losses = " ".join(f"{epoch['train_loss']:.4f}" for epoch in r["epochs"])
        lines.append(
            f"| {r['nprocs']} | {'yes' if r['options']['overlap'] else 'no'} "
            f"| {r['options']['quantization_bits'] or 'exact'} | {last['seconds']:.2f} "
            f"| {losses} | {last['accuracy']:.4f} | {last['bytes_sent'] / 1e6:.1f} |"
        )
    return "\n".join(lines)
