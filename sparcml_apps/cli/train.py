"""Train a sparse linear classifier: on the ranks of an ``mpiexec`` job, or on Dask.

Under ``mpiexec`` (SPMD) every rank loads its share of the rows and all ranks fit
together over ``COMM_WORLD``. With Dask, rank 1 of the job (or a process outside it, given
a scheduler file) builds Dask arrays whose chunks the workers load, and fits on them.
Either way a :class:`Progress` callback prints one row per epoch: the loss, the accuracy
on the test rows, the seconds, the bytes the ranks sent, the bytes a dense allreduce of
the same exchanges would have sent, and how the two compare. Rank 0 (or the Dask client)
writes the model (joblib) and the metrics (JSON).
"""

import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import collectives

from .._modes import set_default_mode
from .._paths import readable_file, writable_file, writable_folder
from ..cluster._guard import describe
from ..datasets import Source, from_shards, read_catalog
from ..datasets._cache import is_cache
from ..datasets._compression import sniff

TOPIC = "sparcml-progress"
"""The Dask event topic on which workers send the progress rows to the client."""
COLUMNS = ("epoch", "loss", "test_accuracy", "seconds", "sent_MB", "dense_MB", "vs_dense")


@dataclass
class Progress:
    """The epoch callback: test accuracy and traffic summed over the ranks, one row each.

    Called on every rank (by the estimator) with ``estimator.comm`` set. Loads its share
    of ``test`` at the first epoch. Rank 0 prints the row, or, on a Dask worker, sends it
    to the client as an event of :data:`TOPIC`. Rows are kept in ``rows``.
    """

    test: Source | None
    rows: list = field(default_factory=list)
    load_seconds: float = 0.0
    """Seconds this rank took to load its test rows."""
    seconds: float = 0.0
    """Seconds this rank spent in the callback: loading and scoring the test rows."""
    bar: object = field(default=None, repr=False)
    """Rank 0's progress bar through the epoch, on a terminal."""

    def steps(self, done, rows):
        """Rank 0 has stepped over ``done`` of its ``rows`` this epoch: a bar on stderr,
        when it is a terminal (rows, rate, time left)."""
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(
                total=rows, desc=f"epoch {len(self.rows) + 1}", unit=" rows", unit_scale=True,
                leave=False, disable=None,
            )  # fmt: skip
        self.bar.update(done - self.bar.n)
        if done >= rows:
            self.bar.close()
            self.bar = None

    def __call__(self, estimator, record):
        begin = time.perf_counter()
        try:
            self._score(estimator, record)
        finally:
            self.seconds += time.perf_counter() - begin

    def _score(self, estimator, record):
        comm = estimator.comm
        if not hasattr(self, "_data"):
            error = None
            begin = time.perf_counter()
            try:
                self._data = self.test.load(comm.Get_rank(), comm.Get_size()) if self.test else None
            except Exception as exc:  # noqa: BLE001 - every rank raises it, below
                error = exc
            self.load_seconds = time.perf_counter() - begin
            collectives.check(error, comm)
        correct, tested = 0.0, 0.0
        if self._data is not None and self._data[0].shape[0]:
            X, y = self._data
            correct, tested = float(np.sum(estimator.predict(X) == y)), float(len(y))
        sums = collectives.allreduce(
            np.array([correct, tested, record["allreduce_bytes_sent"], record["dense_bytes"]]),
            comm,
            algorithm="dense",
        )
        row = {  # plain Python numbers: rows travel as Dask events (msgpack)
            "epoch": int(record["epoch"]),
            "loss": float(record["loss"]),
            "test_accuracy": float(sums[0] / sums[1]) if sums[1] else None,
            "seconds": float(record["seconds"]),
            "bytes_sent": int(sums[2]),
            "dense_bytes": int(sums[3]),
        }
        self.rows.append(row)
        if comm.Get_rank() == 0:
            _emit(row)


def _emit(row):
    """Print ``row``; on a Dask worker, send it to the client as an event instead."""
    distributed = sys.modules.get("distributed")  # loaded on a Dask worker: not imported here
    try:
        worker = distributed.get_worker() if distributed is not None else None
    except ValueError:  # not on a worker
        worker = None
    if worker is None:
        print_row(row)
    else:
        worker.log_event(TOPIC, row)


def print_header(file=sys.stdout):
    print(" ".join(f"{c:>13}" for c in COLUMNS), file=file, flush=True)


def print_row(row, file=sys.stdout):
    accuracy = row["test_accuracy"]
    sent, dense = row["bytes_sent"], row["dense_bytes"]
    cells = [
        f"{row['epoch']:13d}",
        f"{row['loss']:13.6f}",
        f"{accuracy:13.4f}" if accuracy is not None else f"{'-':>13}",
        f"{row['seconds']:13.2f}",
        f"{row['bytes_sent'] / 1e6:13.2f}",
        f"{row['dense_bytes'] / 1e6:13.1f}",
        f"{versus(sent, dense) if sent else '-':>13}",  # one rank sends nothing
    ]
    print(" ".join(cells), file=file, flush=True)


def check_options(options):
    """Raise ValueError naming the first option of ``sparcml train`` that cannot work,
    before any data is read or any rank started."""
    for flag, value, least in (
        ("--ranks", options.ranks, 1),
        ("--rows", options.rows, 1),
        ("--features", options.features, 1),
        ("--nnz-per-row", options.nnz_per_row, 1),
        ("--n-features", options.n_features, 1),
        ("--batch-size", options.batch_size, 1),
        ("--epochs", options.epochs, 1),
        ("--workers", options.workers, 1),
        ("--data-seed", options.data_seed, 0),
        ("--random-state", options.random_state, 0),
    ):
        if value is not None and value < least:
            raise ValueError(f"{flag} must be at least {least}; got {value}")
    for flag, value in (
        ("--data-seed", options.data_seed),
        ("--random-state", options.random_state),
    ):
        if value >= 2**32:
            raise ValueError(f"{flag} must be below 2**32; got {value}")
    if not (math.isfinite(options.alpha) and options.alpha >= 0):
        raise ValueError(f"--alpha must be a finite number >= 0; got {options.alpha}")
    if not 0 <= options.test_fraction < 1:
        raise ValueError(f"--test-fraction must be in [0, 1); got {options.test_fraction}")
    if not (isinstance(options.topk, int) or 0 < options.topk <= 1):
        raise ValueError(f"--topk must be a fraction in (0, 1] or a count >= 1; got {options.topk}")
    if options.checkpoint_seconds is not None and not options.checkpoint_seconds > 0:
        raise ValueError(
            f"--checkpoint-seconds must be a number > 0; got {options.checkpoint_seconds}"
        )
    for flag, value in (
        ("--checkpoint-seconds", options.checkpoint_seconds),
        ("--resume", options.resume or None),
    ):
        if value is not None and options.checkpoint is None:
            raise ValueError(f"{flag} goes with --checkpoint DIR")
    if options.checkpoint is not None:
        folder = Path(options.checkpoint)
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"--checkpoint must be a directory; got the file {folder}")
        _check_path("--checkpoint", writable_folder, folder)
    if options.scheduler_file and not options.dask:
        raise ValueError("--scheduler-file goes with --dask")
    if options.scheduler_file:
        _check_path("--scheduler-file", readable_file, options.scheduler_file)
    for flag, value in (("--interface", options.interface), ("--insecure", options.insecure)):
        if value and not options.dask:
            raise ValueError(f"{flag} goes with --dask")
        if value and options.scheduler_file:
            raise ValueError(
                f"{flag} does not go with --scheduler-file: the cluster of the file was "
                "started with its own"
            )
    if options.shutdown and not options.scheduler_file:
        raise ValueError("--shutdown goes with --scheduler-file")
    if options.ranks is not None and options.dask:
        raise ValueError(
            "--ranks does not go with --dask: start Dask with mpiexec -n N sparcml train "
            "--dask, or give --scheduler-file"
        )
    if options.data_home is not None and Path(options.data_home).exists():
        if not Path(options.data_home).is_dir():
            raise ValueError(f"--data-home must be a directory; got the file {options.data_home}")
    _check_data("--dataset", options.dataset, options.n_features)
    _check_data("--test", options.test, 1)  # its columns are those of --dataset
    model, metrics = Path(options.model), Path(options.metrics)
    _check_path("--model", writable_file, model)
    _check_path("--metrics", writable_file, metrics)
    if model.resolve() == metrics.resolve():
        raise ValueError(f"--model and --metrics must be different files; both are {model}")


def _check_data(flag, value, n_features):
    """A dataset option: a CSR cache, an uncompressed file, or a catalogue name."""
    if value is None:
        return
    path = Path(value)
    if is_cache(path):
        return
    if path.is_dir():
        raise ValueError(f"{flag} {value}: expected a CSR cache directory; it has no manifest.json")
    if path.exists():
        compression = sniff(path)
        if compression != "none":
            raise ValueError(
                f"{flag} {value}: {compression}-compressed data cannot be shared out by "
                "bytes; convert it to a CSR cache (sparcml-datasets convert NAME, or "
                "convert_svmlight) or decompress it"
            )
        if n_features is None:
            raise ValueError(
                f"--n-features is required with the file {value}: each rank reads only its rows"
            )
        return
    catalog = read_catalog()
    if value not in catalog.datasets:
        raise ValueError(
            f"{flag} {value}: no such file or directory, and no dataset of that name in "
            f"the catalogue (known: {', '.join(catalog.datasets)})"
        )


def _check_path(flag, check, path):
    """``check(path)`` (see :mod:`._paths`), its error named after the option ``flag``."""
    try:
        check(path)
    except ValueError as exc:
        raise ValueError(f"{flag} {exc}") from None


def sources(options):
    """The train and test :class:`Source` of the command-line options."""
    common = {
        "n_features": options.n_features,
        "rows": options.rows,
        "features": options.features,
        "nnz_per_row": options.nnz_per_row,
        "seed": options.data_seed,
        "data_home": options.data_home,
    }
    if options.test is not None:
        train = Source(options.dataset, **common)
        return train, Source(options.test, **{**common, "n_features": train.width()})
    if options.test_fraction == 0:
        return Source(options.dataset, **common), None
    held = {"holdout": options.test_fraction, **common}
    return (
        Source(options.dataset, part="train", **held),
        Source(options.dataset, part="test", **held),
    )


def estimator(options, progress):
    # imported here: the process of --ranks N checks the options and starts the ranks,
    # and does without scikit-learn
    from ..estimators import SparseSGDClassifier

    return SparseSGDClassifier(
        loss=options.loss,
        alpha=options.alpha,
        batch_size=options.batch_size,
        max_iter=options.epochs,
        tol=None,
        compression=None if options.compression == "none" else options.compression,
        topk=options.topk,
        allreduce=options.allreduce,
        random_state=options.random_state,
        callback=progress,
        checkpoint=options.checkpoint,
        checkpoint_seconds=options.checkpoint_seconds,
        resume=options.resume,
    )


def run_spmd(options):
    """Every rank of ``COMM_WORLD`` fits on its share; rank 0 writes the results."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    train, test = sources(options)
    progress = Progress(test)
    # made before the rows load (it imports scikit-learn, which takes each rank a
    # different time), so that the check after the load starts the ranks' fit together
    model = estimator(options, progress).set_params(comm=comm)
    error = None
    begin = time.perf_counter()
    try:
        X, y = train.load(rank, size)
    except Exception as exc:  # noqa: BLE001 - every rank raises it, below
        error = exc
    loaded = time.perf_counter() - begin
    collectives.check(error, comm)
    if rank == 0:
        print(f"sparcml train: {train.name()} on {size} MPI rank(s)", flush=True)
        print_header()
    begin = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - begin
    peaks = comm.gather(peak_rss(), root=0)
    if rank == 0:
        timings = {
            "load_seconds": loaded + progress.load_seconds,
            "train_seconds": seconds - progress.seconds,
        }
        finish(options, model, progress.rows, seconds, train, mode="mpi", ranks=size,
               peaks=peaks, **timings)  # fmt: skip
    return 0


def run_dask(options):
    """Fit on the workers of a Dask cluster: this job's (dask-mpi bootstrap) or the one
    of ``options.scheduler_file``."""
    from distributed import Client

    from .. import cluster

    if options.scheduler_file is None:
        # returns on the client rank only
        cluster.initialize(interface=options.interface, insecure=options.insecure)
        client = Client()
        print(f"sparcml train: {describe(client.scheduler.address, options.insecure)}", flush=True)
    else:
        client = Client(scheduler_file=options.scheduler_file)
        address = client.scheduler.address
        print(f"sparcml train: {describe(address, not address.startswith('tls://'))}", flush=True)
        client.wait_for_workers(options.workers, timeout=cluster.JOIN_SECONDS)
    try:
        train, test = sources(options)
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
        X, y = from_shards(train.load, n_workers, train.width(), name="train")
        progress = Progress(test)
        received = []

        def show(event):
            received.append(event[1])
            print_row(event[1])

        client.subscribe_topic(TOPIC, show)
        print(f"sparcml train: {train.name()} on {n_workers} Dask worker(s)", flush=True)
        print_header()
        begin = time.perf_counter()
        model = estimator(options, progress).fit(X, y)
        seconds = time.perf_counter() - begin
        deadline = time.monotonic() + 5
        while len(received) < model.n_iter_ and time.monotonic() < deadline:
            time.sleep(0.05)  # the last rows may still be on their way
        client.unsubscribe_topic(TOPIC)
        peaks = list(client.run(peak_rss).values())
        finish(options, model, received, seconds, train, mode="dask", ranks=n_workers,
               peaks=peaks)  # fmt: skip
    except BaseException:
        if options.scheduler_file is not None:
            client.close()
        raise
    if options.scheduler_file is not None:
        if options.shutdown:
            cluster.shutdown(client)
        client.close()
    return 0


def peak_rss():
    """The most memory this process has held (resident set), in bytes."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def finish(
    options, model, rows, seconds, train, *, mode, ranks, load_seconds=None,
    train_seconds=None, peaks=None,
):  # fmt: skip
    """Print the summary; write the model and the metrics. ``seconds`` is the fit's;
    ``load_seconds`` (reading the train and test rows) and ``train_seconds`` (the fit less
    the epoch callbacks' loading and scoring of test rows) are rank 0's, when known;
    ``peaks``: each rank's (or Dask worker's) peak resident memory so far, in bytes."""
    import joblib

    model.set_params(comm=None, callback=None)
    sent = sum(row["bytes_sent"] for row in rows)
    dense = sum(row["dense_bytes"] for row in rows)
    metrics = {
        "dataset": train.name(),
        "mode": mode,
        "ranks": ranks,
        "epochs": model.n_iter_,
        "resumed_from": model.resumed_from_,
        "fit_seconds": seconds,
        "load_seconds": load_seconds,
        "train_seconds": train_seconds,
        "test_accuracy": rows[-1]["test_accuracy"] if rows else None,
        "bytes_sent": sent,
        "dense_bytes": dense,
        "peak_rss_bytes": peaks,
        "params": {k: v for k, v in model.get_params().items() if k not in ("comm", "callback")},
        "per_epoch": rows,
    }
    if model.resumed_from_ is not None:
        before = model.n_iter_ - len(rows)
        print(
            f"resumed from {model.resumed_from_} ({before} epochs finished before it)", flush=True
        )
    accuracy = metrics["test_accuracy"]
    print(
        f"test accuracy {accuracy:.4f}" if accuracy is not None else "no test rows",
        f"| fit {seconds:.1f} s | {_traffic(sent, dense)}",
        flush=True,
    )
    _write(options.model, lambda path: joblib.dump(model, path))
    _write(
        options.metrics,
        lambda path: Path(path).write_text(json.dumps(metrics, indent=2, default=str) + "\n"),
    )
    print(f"model: {options.model}\nmetrics: {options.metrics}", flush=True)


def _traffic(sent, dense):
    """The bytes sent against those of a dense allreduce of the same exchanges, in words."""
    if not sent:
        return "nothing sent (one rank: no exchange)"
    compared = versus(sent, dense)
    return (
        f"sent {sent / 1e6:.1f} MB, {compared}{' as' if compared == 'as much' else ' than'} "
        f"a dense allreduce of the same exchanges ({dense / 1e6:.1f} MB)"
    )


def versus(sent, dense):
    """How ``sent`` bytes compare with ``dense`` ones: ``"143x less"``, ``"1.4x more"``,
    ``"4.2% less"``, ``"0.0052% more"`` (a percentage below a tenth apart) or ``"as much"``."""
    if sent == dense:
        return "as much"
    word = "less" if sent < dense else "more"
    if not dense:
        return word
    ratio = max(sent, dense) / min(sent, dense)
    if ratio >= 10:
        return f"{ratio:.0f}x {word}"
    if ratio >= 1.1:
        return f"{ratio:.1f}x {word}"
    return f"{abs(sent - dense) / dense * 100:.2g}% {word}"


def _write(path, save):
    """Write the file ``path`` with ``save(temporary path)`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        save(tmp)
        set_default_mode(tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
