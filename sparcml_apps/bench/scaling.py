"""Time to a target accuracy on 1, 2 and 4 ranks with default options: do more ranks train sooner?

For every dataset (the synthetic generators, and LIBSVM files ``TRAIN[,TEST]``), number
of ranks P and network (shared memory, or emulated links of a rate: root only), and every
seed, ``SparseSGDClassifier`` with default options fits on P ranks, each holding a
contiguous block of the training rows, for ``--epochs`` epochs, scored on the test rows
after every epoch (off the clock). On one rank scikit-learn's ``SGDClassifier`` fits too,
an epoch at a time. The runs go in rounds, a seed each, every cell of the round in turn,
so that a slow spell of the machine falls on the cells alike rather than on one of them;
every run records the share of the machine's CPU time its hypervisor gave to others
meanwhile (``steal`` in ``/proc/stat``). The target of a dataset is the mean accuracy one
rank reaches after ``--target-epochs`` epochs, less ``--target-gap``; a run's time to
target is its training time up to the first epoch that reaches it, and a cell's is the
mean over the seeds, with their median beside it (it is "not reached" when a seed never
reaches it). Every cell also reports the mean final accuracy and the mean over the seeds
of the largest fall in test accuracy from one epoch to the next (how steady the curve
is), and on shared memory a fit with every default (``max_iter``, ``tol``) for both
systems: its accuracy, epochs and seconds. On shared memory, for every P > 1, a cell
``alone`` runs the same steps with none of the exchanges (every rank fits its own rows
alone), so that P ranks against half as many can be read against what the machine alone
makes of twice the processes. Writes JSON, a Markdown report and, for each
dataset and network, a plot of test accuracy against time (one line a P) and one of test
accuracy against the epoch (sparcml on each P, and scikit-learn).
"""

import json
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..datasets import GENERATORS
from . import _many_core, _peer_data, netem
from ._output import add_out_argument, apply_quick, draw, slug, write
from .train import add_cell_arguments, cells

RANKS_MODULE = "sparcml_apps.bench._scaling_ranks"
QUICK = {
    "rows": 15_000,  # 12,000 to train: default fits hold rows out and stop in a few epochs
    "features": 100_000,
    "nprocs": [1, 2],
    "networks": ["shm"],
    "seeds": 2,
    "epochs": 3,
    "target_epochs": 2,
}


def add_arguments(parser):
    add_data_arguments(parser)
    add_cell_arguments(parser)
    parser.add_argument("--seeds", type=int, default=5, help="seeds a cell (default: 5)")
    parser.add_argument("--epochs", type=int, default=10, help="epochs a fit (default: 10)")
    parser.add_argument(
        "--target-epochs",
        type=int,
        default=3,
        help="the target is one rank's mean accuracy after this many epochs ... (default: 3)",
    )
    parser.add_argument(
        "--target-gap",
        type=float,
        default=0.003,
        help="... less this (default: 0.003, 0.3 points)",
    )
    parser.add_argument(
        "--loss", default="log_loss", choices=["log_loss", "hinge"], help="(default: log_loss)"
    )
    add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a small grid of a minute")
    parser.add_argument(
        "--many-core",
        action="store_true",
        help="one machine of many cores: P = 1, 2, 4, ... up to its cores, shared memory, "
        "the fits with every default of both losses, --epochs fixed epochs and alone, the "
        "allreduce at each P; the first of --datasets only (default there: url-like)",
    )


def add_data_arguments(parser):
    """``--datasets``, ``--rows`` and ``--features``: what :func:`prepare` reads."""
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=list(GENERATORS),
        metavar="DATASET",
        help=f"generators ({', '.join(GENERATORS)}) or LIBSVM files TRAIN[,TEST] (without "
        "TEST a stratified random fifth is held out) (default: every generator)",
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=400_000,
        help="rows a generator makes, the last fifth for testing (default: 400000)",
    )
    parser.add_argument(
        "--features",
        type=int,
        help="a generator's columns (default: its own; url-like's 3231961)",
    )


def prepare(spec, folder, args):
    """Write the training and test rows of ``spec`` as ``.npz`` files in ``folder``; the
    dataset's name, its file stems and its shape."""
    if spec in GENERATORS:
        from ..datasets import make_url_like

        shape = {} if args.features is None else {"n_features": args.features}
        X, y = make_url_like(args.rows, random_state=0, **{**GENERATORS[spec], **shape})
        cut = X.shape[0] - X.shape[0] // 5
        name, parts = spec, ((X[:cut], y[:cut]), (X[cut:], y[cut:]))
    else:
        name, X, y, X_test, y_test = _peer_data.rows(
            spec, generator_rows=0, max_rows=None, max_test_rows=None
        )
        parts = ((X, y), (X_test, y_test))
    stems = []
    for part, (rows, labels) in zip(("train", "test"), parts, strict=True):
        stem = Path(folder) / f"{slug(Path(name).name)}-{part}"
        sp.save_npz(f"{stem}.npz", rows.tocsr(), compressed=False)
        np.save(f"{stem}-y.npy", np.asarray(labels, np.float64))
        stems.append(str(stem))
    shape = {"rows": parts[0][0].shape[0], "test_rows": parts[1][0].shape[0]}
    return name, stems, {**shape, "n_features": parts[0][0].shape[1]}


def run_cell(stems, nprocs, network, seed, args, alone=False):
    """The records of one cell's run of ``seed``, a system each, with the share of the
    machine's CPU time the hypervisor took meanwhile (None where it is not known); with
    ``alone``, of the ranks fitting their own rows alone."""
    options = [
        "--train", stems[0], "--test", stems[1], "--epochs", args.epochs, "--loss", args.loss,
        "--seeds", seed,
    ]  # fmt: skip
    if alone:
        options.append("--alone")
    elif network == "shm":
        options.append("--defaults")
        if nprocs == 1:
            options.append("--scikit-learn")
    rate = None if network == "shm" else network
    before = cpu_times()
    done = netem.run_module(nprocs, RANKS_MODULE, options, rate=rate, timeout=7200)
    steal = stolen(before, cpu_times())
    if done.returncode != 0:
        raise RuntimeError(
            f"the scaling benchmark failed on {nprocs} ranks ({network}):\n{done.stderr}"
        )
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [{**record, "steal": steal} for record in records]


def cpu_times():
    """The machine's CPU time so far, summed over its CPUs, as ``/proc/stat`` counts it:
    ``(stolen, all)`` in ticks (stolen: taken by the hypervisor for others while a CPU had
    work), or None where there is no such file."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    ticks = [int(field) for field in fields[1:9]]  # user ... steal (the guests are in user)
    return ticks[7], sum(ticks)


def stolen(before, after):
    """The share of the CPU time between two :func:`cpu_times` that was stolen."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def run(args):
    apply_quick(args, QUICK)
    if args.many_core:
        return _run_many_core(args)
    grid = cells(args)
    runs = [(nprocs, network, False) for nprocs, network in grid]
    runs += [(nprocs, network, True) for nprocs, network in grid if nprocs > 1 and network == "shm"]
    for spec in args.datasets:  # a dataset that cannot be read fails before any run
        _peer_data.check(spec)
    records = []
    with tempfile.TemporaryDirectory(prefix="sparcml-scaling-") as folder:
        for spec in args.datasets:
            print(f"writing the rows of {spec} ...", flush=True)
            name, stems, shape = prepare(spec, folder, args)
            for seed in range(args.seeds):
                for nprocs, network, alone in runs:
                    for record in run_cell(stems, nprocs, network, seed, args, alone):
                        record.update(dataset=name, network=network, **shape)
                        records.append(record)
                        print(_progress(record), flush=True)
    summary = summarize(records, args)
    text = report(summary, args)
    print(f"\n{text}")
    write(args.out, "scaling", {"records": records, "summary": summary}, text)
    for dataset in dict.fromkeys(s["dataset"] for s in summary):
        mine = [s for s in summary if s["dataset"] == dataset and s["system"] != "alone"]
        for network in dict.fromkeys(s["network"] for s in mine):
            lines = [s for s in mine if s["network"] in (network, "shm")]
            lines = [s for s in lines if s["network"] == network or s["nprocs"] == 1]
            draw("scaling", lines, args.out / f"scaling-{slug(Path(dataset).name)}-{network}.png",
                 f"{dataset}, {network}")  # fmt: skip
        shm = [s for s in mine if s["network"] == "shm"]
        draw("epochs", shm, args.out / f"epochs-{slug(Path(dataset).name)}.png", dataset)
    return 0


def _run_many_core(args):
    spec = args.datasets[0] if args.datasets != list(GENERATORS) else "url-like"
    _peer_data.check(spec)
    with tempfile.TemporaryDirectory(prefix="sparcml-scaling-") as folder:
        print(f"writing the rows of {spec} ...", flush=True)
        name, stems, _ = prepare(spec, folder, args)
        return _many_core.run(args, stems, name)


def _progress(record):
    last = record["points"][-1]
    return (
        f"{record['dataset']} P={record['nprocs']} {record['network']} {record['system']} "
        f"seed {record['seed']}: {last['epoch']} epochs, {last['seconds']:.2f} s, "
        f"accuracy {last['accuracy']:.4f}{_share(record.get('steal'), ', stolen ')}"
    )


def _share(share, prefix=""):
    """A share as a percentage after ``prefix``; nothing when it is not known."""
    return "" if share is None else f"{prefix}{share * 100:.1f}%"


def largest_fall(points):
    """The largest fall in accuracy from one epoch to the next (0 when it never falls)."""
    accuracy = [p["accuracy"] for p in points]
    return max([0.0] + [a - b for a, b in zip(accuracy, accuracy[1:], strict=False)])


def time_to(points, target):
    """Seconds to the first point at or above ``target``, or None."""
    return next((p["seconds"] for p in points if p["accuracy"] >= target), None)


def summarize(records, args):
    """One summary a dataset, network, P and system: means over the seeds."""
    summary = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        mine = [r for r in records if r["dataset"] == dataset]
        one = [r for r in mine if (r["nprocs"], r["system"]) == (1, "sparcml")]
        index = min(args.target_epochs, args.epochs) - 1
        target = float(np.mean([r["points"][index]["accuracy"] for r in one])) - args.target_gap
        for key in dict.fromkeys((r["network"], r["nprocs"], r["system"]) for r in mine):
            runs = [r for r in mine if (r["network"], r["nprocs"], r["system"]) == key]
            times = [time_to(r["points"], target) for r in runs]
            epochs = np.array([[p["epoch"] for p in r["points"]] for r in runs])
            cell = {
                "dataset": dataset,
                "network": key[0],
                "nprocs": key[1],
                "system": key[2],
                "seeds": len(runs),
                "target": target,
                "time_to_target": None if None in times else float(np.mean(times)),
                "median_time_to_target": None if None in times else float(np.median(times)),
                "reached": sum(t is not None for t in times),
                "final_accuracy": float(np.mean([r["points"][-1]["accuracy"] for r in runs])),
                "largest_fall": float(np.mean([largest_fall(r["points"]) for r in runs])),
                "seconds_per_epoch": float(
                    np.mean([r["points"][-1]["seconds"] / r["points"][-1]["epoch"] for r in runs])
                ),
                "mb_sent_per_epoch": float(
                    np.mean([[p["bytes_sent"] for p in r["points"]] for r in runs]) / 1e6
                ),
                "local_steps": runs[0].get("local_steps"),
                "steal": _mean_known([r.get("steal") for r in runs]),
                "curve": {
                    "epoch": epochs[0].tolist(),
                    "seconds": np.mean(
                        [[p["seconds"] for p in r["points"]] for r in runs], axis=0
                    ).tolist(),
                    "accuracy": np.mean(
                        [[p["accuracy"] for p in r["points"]] for r in runs], axis=0
                    ).tolist(),
                },
            }
            if "defaults" in runs[0]:
                for name in ("accuracy", "epochs", "seconds"):
                    cell[f"defaults_{name}"] = float(np.mean([r["defaults"][name] for r in runs]))
            summary.append(cell)
    return summary


def _mean_known(values):
    """The mean of the values, or None when any is not known."""
    return None if None in values else float(np.mean(values))


def _find(summary, dataset, network, nprocs, system="sparcml"):
    for s in summary:
        if (s["dataset"], s["network"], s["nprocs"], s["system"]) == (
            dataset,
            network,
            nprocs,
            system,
        ):
            return s
    return None


def report(summary, args):
    """The summary as Markdown: time to target against one rank, and the curves' steadiness
    and final accuracy against scikit-learn's."""
    lines = [
        f"Means over {args.seeds} seeds (run in rounds, a seed each, every cell in turn); "
        f"target: one rank's accuracy after "
        f"{args.target_epochs} epochs less {args.target_gap * 100:g} points.",
        "",
        "| dataset | network | P | system | time to target (s): mean (median) "
        "| against 1 rank: mean (median) | s/epoch "
        "| final accuracy | largest fall (points) | defaults: accuracy (epochs, s) "
        "| MB sent a rank an epoch | local steps | CPU time stolen |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        one = _find(summary, s["dataset"], "shm", 1)
        time = s["time_to_target"]
        shown = f"not reached ({s['reached']} of {s['seeds']})"
        ratio = ""
        if time is not None:
            shown = f"{time:.2f} ({s['median_time_to_target']:.2f})"
        if time is not None and one and one["time_to_target"]:
            ratio = (
                f"{time / one['time_to_target']:.2f}x "
                f"({s['median_time_to_target'] / one['median_time_to_target']:.2f}x)"
            )
        defaults = ""
        if "defaults_accuracy" in s:
            defaults = (
                f"{s['defaults_accuracy']:.4f} ({s['defaults_epochs']:.1f}, "
                f"{s['defaults_seconds']:.2f})"
            )
        lines.append(
            f"| {s['dataset']} | {s['network']} | {s['nprocs']} | {s['system']} | {shown} "
            f"| {ratio} | {s['seconds_per_epoch']:.3f} | {s['final_accuracy']:.4f} "
            f"| {s['largest_fall'] * 100:.2f} | {defaults} | {s['mb_sent_per_epoch']:.2f} "
            f"| {s['local_steps'] if s['local_steps'] is not None else ''} "
            f"| {_share(s['steal'])} |"
        )
    targets = dict.fromkeys((s["dataset"], s["target"]) for s in summary)
    lines.append("")
    lines += [f"target accuracy on {dataset}: {target:.4f}" for dataset, target in targets]
    for s in summary:  # P > 2 ranks against half as many
        half = _find(summary, s["dataset"], s["network"], s["nprocs"] // 2, s["system"])
        if s["nprocs"] > 2 and half:
            lines.append(_against_half(s, half))
    lines += [
        "",
        "alone: every rank fits its own rows alone, the same steps as on P ranks with none "
        "of the exchanges (the accuracy is that of the ranks' models, each on its own test "
        "rows).",
        "CPU time stolen: the share of the machine's CPU time its hypervisor gave to others "
        "during a cell's runs (mean over the seeds).",
    ]
    return "\n".join(lines)


def _against_half(s, half):
    """A line of P ranks' cell ``s`` against ``half`` as many: time to target where both
    reached it (sparcml), and seconds an epoch."""
    alone = ", each rank alone" if s["system"] == "alone" else ""
    where = f"{s['dataset']} ({s['network']}{alone})"
    line = f"{s['nprocs']} ranks against {half['nprocs']} on {where}:"
    if s["system"] == "sparcml" and half["time_to_target"] and s["time_to_target"]:
        line += (
            f" time to target {s['time_to_target'] / half['time_to_target']:.2f}x "
            f"(medians {s['median_time_to_target'] / half['median_time_to_target']:.2f}x),"
        )
    return f"{line} seconds an epoch {s['seconds_per_epoch'] / half['seconds_per_epoch']:.2f}x"
