"""sparcml: train a sparse linear classifier over sparse allreduce, or run a benchmark."""

import argparse
import sys

import collectives

from .. import _mpiexec
from ..datasets._home import HOME_VARIABLE


def build_parser():
    parser = argparse.ArgumentParser(prog="sparcml", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = commands.add_parser(
        "train",
        help="train SparseSGDClassifier (under mpiexec, on local ranks, or on Dask)",
        description="Train SparseSGDClassifier on a dataset's rows spread over MPI ranks "
        "(every rank of an mpiexec job, --ranks N local ones, or the workers of a Dask "
        "cluster with --dask); print a progress table; write the model and the metrics.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        # --ranks is taken out of the ranks' own command line by its full spelling, so an
        # abbreviation (--rank 4) would start every rank's ranks again
        allow_abbrev=False,
    )
    add_train_arguments(train)
    commands.add_parser(
        "bench", help="run a benchmark: sparcml bench NAME ... (python -m sparcml_apps.bench)"
    )
    return parser


def add_train_arguments(parser):
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        metavar="NAME|PATH",
        help="a catalogue name, an uncompressed LIBSVM file or a CSR cache directory "
        "(default: the synthetic url-like data)",
    )
    data.add_argument(
        "--n-features", type=int, help="columns of a LIBSVM file (required for files)"
    )
    data.add_argument("--rows", type=int, default=200_000, help="synthetic data: rows")
    data.add_argument("--features", type=int, default=3_231_961, help="synthetic: columns")
    data.add_argument("--nnz-per-row", type=int, default=116, help="synthetic data: nonzeros a row")
    data.add_argument("--data-seed", type=int, default=0, help="synthetic data: seed")
    data.add_argument("--test", metavar="NAME|PATH", help="the test set (as --dataset)")
    data.add_argument(
        "--test-fraction",
        type=float,
        default=0.2,
        help="without --test: the share of each rank's rows held out for testing",
    )
    data.add_argument(
        "--data-home", metavar="DIR", help=f"where datasets are kept (default: ${HOME_VARIABLE})"
    )
    model = parser.add_argument_group("estimator")
    model.add_argument(
        "--loss",
        default="log_loss",
        choices=["hinge", "log_loss", "squared_hinge", "modified_huber"],
    )
    model.add_argument("--alpha", type=float, default=1e-4, help="L2 strength")
    model.add_argument("--batch-size", type=int, default=16, help="rows per rank per step")
    model.add_argument("--epochs", type=int, default=5, help="passes over the data")
    model.add_argument("--compression", default="none", choices=["none", "topk"])
    model.add_argument(
        "--topk",
        type=_fraction_or_count,
        default=0.01,
        help="TopK: a fraction of the coordinates, or a count",
    )
    model.add_argument(
        "--allreduce",
        default="auto",
        choices=["auto", *collectives.ALGORITHMS],
        help="the sparse allreduce algorithm",
    )
    model.add_argument("--random-state", type=int, default=0, help="seed of the training")
    run = parser.add_argument_group("where it runs")
    run.add_argument(
        "--ranks",
        type=int,
        help="start this many local MPI ranks (default: the ranks of this job, 1 outside mpiexec)",
    )
    run.add_argument(
        "--dask",
        action="store_true",
        help="train on Dask: run under mpiexec with at least 3 ranks (rank 0 the "
        "scheduler, rank 1 this command, the others workers), or with --scheduler-file",
    )
    run.add_argument(
        "--scheduler-file",
        metavar="FILE",
        help="with --dask: the scheduler file of a running cluster (dask-mpi "
        "--scheduler-file FILE --worker-class distributed.Worker)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=1,
        help="with --scheduler-file: wait until this many workers have joined",
    )
    run.add_argument(
        "--shutdown",
        action="store_true",
        help="with --scheduler-file: shut the cluster down at the end",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--model", default="sparcml-model.joblib", help="the model file (joblib)")
    out.add_argument("--metrics", default="sparcml-metrics.json", help="the metrics file")


def _fraction_or_count(text):
    value = float(text)
    return int(value) if value >= 1 and value.is_integer() else value


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        from ..bench.__main__ import main as bench

        return bench(argv[1:])
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.scheduler_file and not options.dask:
        parser.error("--scheduler-file goes with --dask")
    if options.ranks is not None:
        if options.dask or options.ranks < 1:
            parser.error("--ranks takes a positive count, and not with --dask")
        rest = _without_ranks(argv)
        return _mpiexec.run_module(
            options.ranks, "sparcml_apps.cli.main", rest, capture=False
        ).returncode
    from .. import train

    try:
        return train.run_dask(options) if options.dask else train.run_spmd(options)
    except Exception as exc:  # noqa: BLE001 - reported as one line; every rank raised
        if options.dask or not isinstance(exc, collectives.RankError) or _rank() == 0:
            print(f"sparcml train: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _without_ranks(argv):
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--ranks":
            skip = True
        elif not arg.startswith("--ranks="):
            rest.append(arg)
    return rest


def _rank():
    from ..cluster._bootstrap import describe_worker

    return (describe_worker() or (0, 1))[0]


if __name__ == "__main__":
    raise SystemExit(main())
