"""Time to a target test accuracy, for each way of summing the steps, ranks and network.

For every dataset (the url-like synthetic data, and any given), number of ranks P and
network (shared memory, or emulated links of a rate: root only), every method fits
``SparseSGDClassifier`` with the same loss, batch size per rank and seed, a part of an
epoch at a time, scored on the test rows between parts (off the clock): exact sparse allreduce
(each algorithm and ``auto``), the same trainer over dense allreduce, TopK 1% and 0.1%
with and without error feedback, 4-bit values, and scikit-learn's ``SGDClassifier`` (one
process). The target accuracy is the best final accuracy of the dataset's runs less
``--target-gap``; a method's time to target is its training time up to the first part
that reaches it. A dense run stopped by ``--max-seconds`` before the target sums the same
steps as the exact one, so its time to target is estimated from its seconds an epoch and
the epochs the exact run needed (marked "est."). Writes JSON, a Markdown table and, for
each cell of more than one rank, a plot of loss and accuracy against time and bytes.
"""

import json
from pathlib import Path

from .._paths import OptionError, option
from ..datasets import Source
from . import netem
from ._output import add_out_argument, apply_quick, draw, slug, write

RANKS_MODULE = "sparcml_apps.bench._train_ranks"
METHODS = {
    "exact, auto": {"allreduce": "auto"},
    "exact, ssar_recursive_double": {"allreduce": "ssar_recursive_double"},
    "exact, ssar_split_allgather": {"allreduce": "ssar_split_allgather"},
    "exact, dsar_split_allgather": {"allreduce": "dsar_split_allgather"},
    "dense allreduce": {"allreduce": "dense"},
    "TopK 1%, EF": {"compression": "topk", "topk": 0.01},
    "TopK 1%, no EF": {"compression": "topk", "topk": 0.01, "error_feedback": False},
    "TopK 0.1%, EF": {"compression": "topk", "topk": 0.001},
    "TopK 0.1%, no EF": {"compression": "topk", "topk": 0.001, "error_feedback": False},
    "exact, 4-bit values": {"quantization_bits": 4},
    "scikit-learn SGDClassifier": {"sklearn": True},
}
ONE_RANK = ["exact, auto", *(name for name in METHODS if name.startswith("TopK"))]
ONE_RANK.append("scikit-learn SGDClassifier")
EXACT, DENSE = "exact, auto", "dense allreduce"
QUICK = {
    "rows": 10_000,
    "features": 100_000,
    "epochs": 2,
    "nprocs": [1, 2],
    "networks": ["shm"],
    "max_seconds": 30.0,
}


def add_arguments(parser):
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["url-like"],
        metavar="TRAIN[,TEST]",
        help="'url-like' (the synthetic data), or a catalogue name, LIBSVM file or cache, "
        "optionally with its test rows after a comma (else --test-fraction of the rows are "
        "held out); default: url-like",
    )
    parser.add_argument(
        "--rows", type=int, default=100_000, help="url-like rows, train and test (default: 100000)"
    )
    parser.add_argument(
        "--features", type=int, default=3_231_961, help="url-like columns (default: 3231961)"
    )
    parser.add_argument(
        "--n-features",
        type=int,
        help="columns of the datasets given as files (catalogue names know theirs)",
    )
    parser.add_argument(
        "--test-fraction", type=float, default=0.2, help="rows held out (default: 0.2)"
    )
    parser.add_argument("--epochs", type=int, default=3, help="epochs a method (default: 3)")
    parser.add_argument(
        "--batch-size", type=int, default=64, help="rows per rank a step (default: 64)"
    )
    parser.add_argument(
        "--loss", default="log_loss", choices=["log_loss", "hinge"], help="(default: log_loss)"
    )
    add_cell_arguments(parser)
    add_local_steps_argument(parser)
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=list(METHODS),
        default=list(METHODS),
        metavar="METHOD",
        help=f"of: {'; '.join(METHODS)} (default: all)".replace("%", "%%"),  # argparse formats
    )
    parser.add_argument(
        "--parts",
        type=int,
        default=3,
        help="fits an epoch, each over the next block of rows, scored after each (default: 3)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=20.0,
        help="a method stops after the part that passes this much training (default: 20)",
    )
    parser.add_argument(
        "--target-gap",
        type=float,
        default=0.01,
        help="target accuracy: the dataset's best final accuracy less this (default: 0.01)",
    )
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a small grid of a minute")


def ranks_options(
    *, rows, features, epochs, batch_size, loss, test_fraction, max_seconds=None, parts=None,
    dataset=None, n_features=None,
):  # fmt: skip
    """The options of the ranks' module; ``dataset`` is ``TRAIN[,TEST]`` (None: url-like
    data of ``rows`` rows and ``features`` columns)."""
    options = {
        "rows": rows, "features": features, "epochs": epochs, "batch-size": batch_size,
        "loss": loss, "test-fraction": test_fraction, "max-seconds": max_seconds, "parts": parts,
    }  # fmt: skip
    if dataset not in (None, "url-like"):
        train, _, test = dataset.partition(",")
        options.update({"dataset": train, "test": test or None, "n-features": n_features})
    return [
        item for key, value in options.items() if value is not None for item in (f"--{key}", value)
    ]


def add_url_like_arguments(parser, *, rows, test_rows, epochs):
    """The url-like data's --rows (to train), --test-rows, --features, and --epochs."""
    parser.add_argument("--rows", type=int, default=rows, help=f"training rows (default: {rows})")
    parser.add_argument(
        "--test-rows", type=int, default=test_rows, help=f"test rows (default: {test_rows})"
    )
    parser.add_argument(
        "--features", type=int, default=3_231_961, help="columns, as url (default: 3231961)"
    )
    parser.add_argument("--epochs", type=int, default=epochs, help=f"epochs (default: {epochs})")


def url_like_options(args, *, batch_size, loss):
    """The ranks' module options for the arguments of :func:`add_url_like_arguments`."""
    total = args.rows + args.test_rows
    return ranks_options(
        rows=total, features=args.features, epochs=args.epochs, batch_size=batch_size,
        loss=loss, test_fraction=args.test_rows / total,
    )  # fmt: skip


def run_methods(nprocs, methods, options, *, rate=None, timeout=3600):
    """Run ``methods`` (names to estimator options) on ``nprocs`` ranks, over links of
    ``rate`` if given, with the ranks' module ``options``; a record a method."""
    chosen = [{"name": name, "options": value} for name, value in methods.items()]
    arguments = [*options, "--methods", json.dumps(chosen)]
    done = netem.run_module(nprocs, RANKS_MODULE, arguments, rate=rate, timeout=timeout)
    if done.returncode != 0:
        where = f"{nprocs} ranks" + (f" over {rate} links" if rate else "")
        raise RuntimeError(f"the training benchmark failed on {where}:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def add_cell_arguments(parser):
    """--nprocs and --networks: the cells of a grid of ranks and networks."""
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[1, 2, 4], help="numbers of ranks (default: 1 2 4)"
    )
    parser.add_argument(
        "--networks",
        nargs="+",
        default=["shm", "10gbit", "1gbit"],
        help="'shm' (one node) and tc rates of emulated links, each at every P > 1 "
        "(default: shm 10gbit 1gbit)",
    )


def cells(args):
    """(nprocs, network) pairs to run: shared memory at every P, links at P > 1 (those
    that cannot be made here are left out, saying why)."""
    for network in list(args.networks):
        reason = None if network == "shm" else netem.skip_reason(network)
        if reason:
            print(f"skipping the {network} links: {reason}")
            args.networks.remove(network)
    return [
        (nprocs, network)
        for nprocs in args.nprocs
        for network in args.networks
        if network == "shm" or nprocs > 1
    ]


def methods_at(nprocs, chosen, local_steps):
    """The methods that mean something at ``nprocs`` ranks (on one rank every exact
    algorithm, dense and quantized sums are the rank's own step), each of ours with
    ``local_steps`` steps between exchanges."""
    names = [m for m in chosen if (m in ONE_RANK if nprocs == 1 else "scikit" not in m)]
    return {name: with_local_steps(METHODS[name], local_steps) for name in names}


def with_local_steps(options, local_steps):
    """The estimator ``options`` with ``local_steps`` (scikit-learn's as they are)."""
    return options if options.get("sklearn") else {**options, "local_steps": local_steps}


def local_steps(text):
    """``local_steps`` as a fit takes it: a whole number of at least 1, or 'auto'."""
    if text == "auto":
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f"expected a whole number of at least 1 or 'auto', got {text!r}")


def add_local_steps_argument(parser):
    """--local-steps (a fit's default, 'auto', exchanges seldom, and then mostly densely)."""
    parser.add_argument(
        "--local-steps",
        type=option(local_steps),
        default=1,
        help="steps a rank takes between exchanges: 1 (default), an exchange every step, "
        "where the ways of exchanging differ, or 'auto' as a fit's default",
    )


def run(args):
    apply_quick(args, QUICK)
    records = []
    grid = cells(args)
    for dataset in args.datasets:  # a dataset that cannot be read fails before any run
        if dataset != "url-like":
            try:
                Source(dataset.partition(",")[0], n_features=args.n_features).width()
            except (OSError, ValueError) as exc:
                raise OptionError(f"--datasets {dataset}: {exc}") from None
    for dataset in args.datasets:
        options = ranks_options(
            rows=args.rows, features=args.features, epochs=args.epochs,
            batch_size=args.batch_size, loss=args.loss, test_fraction=args.test_fraction,
            max_seconds=args.max_seconds, parts=args.parts, dataset=dataset,
            n_features=args.n_features,
        )  # fmt: skip
        for nprocs, network in grid:
            rate = None if network == "shm" else network
            for record in run_methods(
                nprocs, methods_at(nprocs, args.methods, args.local_steps), options, rate=rate
            ):
                record.update(dataset=_name(dataset), network=network)
                records.append(record)
                print(_progress(record), flush=True)
    summarize(records, args.target_gap)
    text = table(records)
    print(f"\n{text}")
    write(args.out, "train", records, text)
    _draw(records, args.out)
    return 0


def _progress(record):
    last = record["epochs"][-1]
    return (
        f"{record['dataset']} P={record['nprocs']} {record['network']} {record['method']}: "
        f"{last['epoch']:g} epochs, {last['seconds']:.1f} s, accuracy {last['accuracy']:.4f}"
    )


def summarize(records, gap):
    """Add ``target``, ``time_to_target`` and ``estimated`` to every record."""
    for dataset in {r["dataset"] for r in records}:
        mine = [r for r in records if r["dataset"] == dataset]
        target = max(r["epochs"][-1]["accuracy"] for r in mine) - gap
        for r in mine:
            r["target"] = target
            reached = [e for e in r["epochs"] if e["accuracy"] >= target]
            r["time_to_target"] = reached[0]["seconds"] if reached else None
            r["epochs_to_target"] = reached[0]["epoch"] if reached else None
            r["estimated"] = False
        for r in mine:
            twin = _find(mine, r["nprocs"], r["network"], EXACT)
            if r["method"] == DENSE and r["time_to_target"] is None and twin:
                if twin["epochs_to_target"] is not None:
                    per_epoch = r["epochs"][-1]["seconds"] / r["epochs"][-1]["epoch"]
                    r["time_to_target"] = per_epoch * twin["epochs_to_target"]
                    r["estimated"] = True


def _find(records, nprocs, network, method):
    for r in records:
        if (r["nprocs"], r["network"], r["method"]) == (nprocs, network, method):
            return r
    return None


def _ratio(numerator, denominator):
    if numerator is None or not denominator:
        return ""
    return f"{numerator / denominator:.1f}x"


def table(records):
    """The records as a Markdown table, speed and bytes against the dense allreduce."""
    lines = [
        "| dataset | P | network | method | epochs | s/epoch | rows/s | time to target (s) "
        "| dense/this time | final accuracy | MB sent/rank | dense/this bytes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        last = r["epochs"][-1]
        dense = _find(
            [d for d in records if d["dataset"] == r["dataset"]], r["nprocs"], r["network"], DENSE
        )
        time = r["time_to_target"]
        shown = (
            "not reached" if time is None else f"{time:.2f}" + (" est." if r["estimated"] else "")
        )
        dense_time = dense and dense["time_to_target"]
        dense_bytes = dense and dense["epochs"][-1]["bytes_sent"] / dense["epochs"][-1]["epoch"]
        sent_per_epoch = last["bytes_sent"] / last["epoch"]
        lines.append(
            f"| {r['dataset']} | {r['nprocs']} | {r['network']} | {r['method']} "
            f"| {last['epoch']:g}{' (capped)' if r['capped'] else ''} "
            f"| {last['seconds'] / last['epoch']:.2f} "
            f"| {r['rows'] * last['epoch'] / last['seconds']:,.0f} | {shown} "
            f"| {_ratio(dense_time, time) if r is not dense else ''} "
            f"| {last['accuracy']:.4f} | {last['bytes_sent'] / 1e6:.1f} "
            f"| {_ratio(dense_bytes, sent_per_epoch) if r is not dense else ''} |"
        )
    target = {r["dataset"]: r["target"] for r in records}
    notes = [f"target accuracy on {name}: {value:.4f}" for name, value in target.items()]
    return "\n".join(lines + [""] + notes)


def _draw(records, out):
    """A plot for each dataset and cell of more than one rank."""
    for dataset, nprocs, network in dict.fromkeys(
        (r["dataset"], r["nprocs"], r["network"]) for r in records if r["nprocs"] > 1
    ):
        mine = [
            r
            for r in records
            if (r["dataset"], r["nprocs"], r["network"]) == (dataset, nprocs, network)
        ]
        name = f"train-{slug(dataset)}-P{nprocs}-{network}.png"
        draw("curves", mine, out / name, f"{dataset}, P = {nprocs}, {network}")


def _name(dataset):
    """How the tables name ``TRAIN[,TEST]``: the training file's name."""
    return Path(dataset.partition(",")[0]).name
