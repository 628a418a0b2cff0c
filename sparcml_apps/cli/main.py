"""sparcml: train a sparse linear classifier over sparse allreduce, or run a benchmark."""

import argparse
import sys

import collectives

from .. import _mpiexec
from ..datasets._home import DEFAULT_HOME, HOME_VARIABLE


def build_parser():
    parser = argparse.ArgumentParser(prog="sparcml", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = commands.add_parser(
        "train",
        help="train SparseSGDClassifier (under mpiexec, on local ranks, or on Dask)",
        description="Train SparseSGDClassifier on a dataset's rows spread over MPI ranks "
        "(every rank of an mpiexec job, --ranks N local ones, or the workers of a Dask "
        "cluster with --dask); print a progress table; write the model and the metrics. "
        "Every option is checked before any data is read or any rank started.",
        # --ranks is taken out of the ranks' own command line by its full spelling, so an
        # abbreviation (--rank 4) would start every rank's ranks again
        allow_abbrev=False,
    )
    add_train_arguments(train)
    train.set_defaults(parser=train)
    commands.add_parser("bench", help="run a benchmark: sparcml bench NAME ... (--help: the list)")
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
        "--n-features",
        type=int,
        metavar="N",
        help="columns of a LIBSVM file (default: none; required with a --dataset file)",
    )
    data.add_argument(
        "--rows",
        type=int,
        default=200_000,
        metavar="N",
        help="synthetic data: rows (default: %(default)s)",
    )
    data.add_argument(
        "--features",
        type=int,
        default=3_231_961,
        metavar="N",
        help="synthetic data: columns (default: %(default)s)",
    )
    data.add_argument(
        "--nnz-per-row",
        type=int,
        default=116,
        metavar="N",
        help="synthetic data: nonzeros a row (default: %(default)s)",
    )
    data.add_argument(
        "--data-seed",
        type=int,
        default=0,
        metavar="SEED",
        help="synthetic data: seed (default: %(default)s)",
    )
    data.add_argument(
        "--test",
        metavar="NAME|PATH",
        help="the test set, as --dataset (default: --test-fraction of the training data)",
    )
    data.add_argument(
        "--test-fraction",
        type=float,
        default=0.2,
        metavar="F",
        help="without --test: the share of each rank's rows held out for testing, in [0, 1) "
        "(default: %(default)s)",
    )
    data.add_argument(
        "--data-home",
        metavar="DIR",
        help=f"where datasets are kept (default: ${HOME_VARIABLE}, else {DEFAULT_HOME})",
    )
    model = parser.add_argument_group("estimator")
    model.add_argument(
        "--loss",
        default="log_loss",
        choices=["hinge", "log_loss", "squared_hinge", "modified_huber"],
        help="the loss (default: %(default)s)",
    )
    model.add_argument(
        "--alpha", type=float, default=1e-4, help="L2 strength, >= 0 (default: %(default)s)"
    )
    model.add_argument(
        "--batch-size",
        type=int,
        default=16,
        metavar="N",
        help="rows per rank per step (default: %(default)s)",
    )
    model.add_argument(
        "--epochs",
        type=int,
        default=5,
        metavar="N",
        help="passes over the data (default: %(default)s)",
    )
    model.add_argument(
        "--compression",
        default="none",
        choices=["none", "topk"],
        help="what each rank sends of its step (default: %(default)s: all of it)",
    )
    model.add_argument(
        "--topk",
        type=_fraction_or_count,
        default=0.01,
        metavar="K",
        help="with --compression topk: a fraction in (0, 1] of the coordinates, or a count "
        ">= 1 (default: %(default)s)",
    )
    model.add_argument(
        "--allreduce",
        default="auto",
        choices=["auto", *collectives.ALGORITHMS],
        help="the sparse allreduce algorithm (default: %(default)s)",
    )
    model.add_argument(
        "--random-state",
        type=int,
        default=0,
        metavar="SEED",
        help="seed of the training (default: %(default)s)",
    )
    run = parser.add_argument_group("where it runs")
    run.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="start this many local MPI ranks (default: the ranks of this job, 1 outside mpiexec)",
    )
    run.add_argument(
        "--dask",
        action="store_true",
        help="train on Dask: run under mpiexec with at least 3 ranks (rank 0 the "
        "scheduler, rank 1 this command, the others workers), or with --scheduler-file "
        "(default: MPI ranks)",
    )
    run.add_argument(
        "--interface",
        metavar="NAME",
        help="with --dask: the network interface the scheduler and the workers listen on, "
        "e.g. ib0 (default: the loopback interface when every rank runs on this host, else "
        "every interface of the host)",
    )
    run.add_argument(
        "--insecure",
        action="store_true",
        help="with --dask: plain TCP, no TLS: any process that reaches the cluster's "
        "addresses can run code in it; only on a network of your own (default: TLS with "
        "credentials made for this run, held by its ranks only)",
    )
    run.add_argument(
        "--scheduler-file",
        metavar="FILE",
        help="with --dask: the scheduler file of a running cluster (dask-mpi "
        "--scheduler-file FILE --worker-class distributed.Worker) (default: none: the "
        "cluster of this mpiexec job)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="with --scheduler-file: wait until this many workers have joined "
        "(default: %(default)s)",
    )
    run.add_argument(
        "--shutdown",
        action="store_true",
        help="with --scheduler-file: shut the cluster down at the end (default: leave it)",
    )
    state = parser.add_argument_group("checkpoints")
    state.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="save the whole training state in DIR (the same on every rank) after every "
        "epoch (default: none)",
    )
    state.add_argument(
        "--checkpoint-seconds",
        type=float,
        metavar="S",
        help="with --checkpoint, save within an epoch too, every S seconds (default: none)",
    )
    state.add_argument(
        "--resume",
        action="store_true",
        help="with --checkpoint, continue from the newest complete checkpoint in DIR, if "
        "any, to the model of a run never stopped (default: start afresh)",
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--model",
        default="sparcml-model.joblib",
        metavar="FILE",
        help="the model file, joblib (default: %(default)s)",
    )
    out.add_argument(
        "--metrics",
        default="sparcml-metrics.json",
        metavar="FILE",
        help="the metrics file, JSON (default: %(default)s)",
    )


def _fraction_or_count(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction or a count; got {text!r}") from None
    return int(value) if value >= 1 and value.is_integer() else value


def _log_choices():
    """Every rank says on stderr how it holds its rows (in memory or out of core)."""
    import logging

    logger = logging.getLogger("sparcml_apps.training.memory")
    if not logger.handlers:  # (once, however often main runs in a process)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("sparcml train: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        from ..bench.__main__ import main as bench

        return bench(argv[1:], prog="sparcml bench")
    options = build_parser().parse_args(argv)
    from . import train

    try:
        train.check_options(options)
    except ValueError as exc:
        options.parser.error(str(exc))
    try:
        if options.ranks is not None:
            rest = _without_ranks(argv)
            return _mpiexec.run_module(
                options.ranks, "sparcml_apps.cli.main", rest, capture=False
            ).returncode
        _log_choices()
        return train.run_dask(options) if options.dask else train.run_spmd(options)
    except KeyboardInterrupt:
        if options.ranks is not None or options.dask or _rank() == 0:
            print("sparcml train: interrupted; no model or metrics written", file=sys.stderr)
        return 130
    except _mpiexec.Terminated as ended:
        print(
            f"sparcml train: ended by {ended.signal.name}; the ranks were stopped, no model "
            "or metrics written",
            file=sys.stderr,
        )
        return ended.code
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
