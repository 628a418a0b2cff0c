"""Time each allreduce algorithm against MPI's dense Allreduce over sizes and densities.

For every P, size N and density: each algorithm's median and least time (slowest rank,
over rounds that run every algorithm in turn), the time the cost model predicts, bytes sent
per rank (largest over ranks) and what the alpha-beta model predicts, and the
speedup over MPI ``Allreduce`` of the already-dense vector. Prints a table, how often
``auto`` came within 10% of the fastest fixed algorithm, and writes JSON. With ``--rate``,
the ranks talk over emulated links of that rate (:mod:`sparcml_apps.bench.netem`; root only).
"""

import json

from collectives import ALGORITHMS

from . import netem
from ._output import add_out_argument, apply_quick, draw, write

QUICK = {"sizes": [2**16], "densities": [0.001, 0.01], "nprocs": [2], "repeat": 3}


def add_arguments(parser):
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[2, 4], help="numbers of ranks (default: 2 4)"
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[2**20, 2**22, 2**24],
        help="vector lengths N (default: 2^20 2^22 2^24)",
    )
    parser.add_argument(
        "--densities",
        type=float,
        nargs="+",
        default=[0.0001, 0.001, 0.01, 0.1],
        help="nonzeros per rank over N (default: 0.0001 0.001 0.01 0.1)",
    )
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "float64"],
        help="value type (default: float32)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per cell (default: 5)")
    add_out_argument(parser)
    parser.add_argument(
        "--algorithms",
        nargs="+",
        default=None,
        help="the algorithms to time (default: all, and auto)",
    )
    parser.add_argument(
        "--wait",
        choices=["auto", "poll", "nap"],
        default="auto",
        help="how waiting ranks wait: collectives.thresholds.WAIT (default: auto)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small grid that runs in seconds (N=2^16, P=2)"
    )
    parser.add_argument(
        "--rate",
        help="run the ranks in network namespaces over links of this tc rate, e.g. 1gbit "
        "(root only; default: the local node, shared memory)",
    )


def _run_ranks(nprocs, args):
    worker_args = [
        "--sizes",
        *args.sizes,
        "--densities",
        *args.densities,
        "--dtype",
        args.dtype,
        "--repeat",
        args.repeat,
        "--wait",
        args.wait,
    ]
    if args.algorithms:
        worker_args += ["--algorithms", *args.algorithms]
    done = netem.run_module(
        nprocs, "sparcml_apps.bench._allreduce_ranks", worker_args, rate=args.rate
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the allreduce benchmark failed on {nprocs} ranks (exit {done.returncode}):\n"
            f"{done.stderr}"
        )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def table(records):
    """The records as a Markdown table."""
    lines = [
        "| P | N | density | algorithm | median ms | least ms | model ms | MB sent/rank | "
        "model MB | sent/model | speedup vs dense |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        name = r["algorithm"] if r["algorithm"] == r["chosen"] else f"auto ({r['chosen']})"
        model = r["model_bytes_sent"]
        ratio = r["bytes_sent_per_rank"] / model if model else 1.0
        lines.append(
            f"| {r['nprocs']} | 2^{r['size'].bit_length() - 1} | {r['density']:.2%} | {name} "
            f"| {r['seconds'] * 1e3:.3f} | {r['best_seconds'] * 1e3:.3f} "
            f"| {'' if r['model_seconds'] is None else format(r['model_seconds'] * 1e3, '.3f')} "
            f"| {r['bytes_sent_per_rank'] / 1e6:.3f} "
            f"| {model / 1e6:.3f} | {ratio:.2f} | {r['speedup_vs_dense']:.1f}x |"
        )
    return "\n".join(lines)


def auto_summary(records, slack=0.10):
    """In how many cells ``auto`` came within ``slack`` of the fastest fixed algorithm: by
    the least time of the algorithm it chose, and by its own least time (other work on the
    machine only ever adds time; the two differ by the timing noise of separate calls)."""
    cells = {}
    for r in records:
        cells.setdefault((r["nprocs"], r["size"], r["density"]), []).append(r)
    chose = timed = total = 0
    for cell in cells.values():
        fixed = {r["algorithm"]: r["best_seconds"] for r in cell if r["algorithm"] in ALGORITHMS}
        auto = [r for r in cell if r["algorithm"] == "auto"]
        if auto and fixed:
            total += 1
            fastest = (1 + slack) * min(fixed.values())
            chose += fixed.get(auto[0]["chosen"], float("inf")) <= fastest
            timed += auto[0]["best_seconds"] <= fastest
    return (
        f"auto within {slack:.0%} of the fastest fixed algorithm: its choice in {chose} of "
        f"{total} cells, its own timed calls in {timed} of {total}"
    )


def run(args):
    apply_quick(args, QUICK)
    reason = netem.skip_reason(args.rate)  # a bad rate fails before anything starts
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    if args.rate:
        print(f"ranks in network namespaces, links of {args.rate} each way (MPICH over TCP)\n")
    records = []
    for nprocs in args.nprocs:
        records += _run_ranks(nprocs, args)
    text = f"{table(records)}\n\n{auto_summary(records)}"
    print(text)
    name = "allreduce" + (f"-{args.rate}" if args.rate else "")
    write(args.out, name, records, text)
    draw("allreduce_times", records, args.out / f"{name}.png")
    return 0
