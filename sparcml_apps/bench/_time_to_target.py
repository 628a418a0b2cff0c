"""Time to a target accuracy on 1 to 1,024 ranks at the shapes of url, webspam and kdd2012,
projected from what is measured here.

For each shape: url-like rows of its width and nonzeros a row are generated, and on them
are measured how the distinct columns grow with the rows (the entries of a rank's
changes) and the seconds of an epoch's steps per nonzero on one rank, with default
options. On P ranks, each of ``rows / P`` rows, the period between exchanges is the one
``local_steps="auto"`` picks (:func:`sparcml_apps.training.exchange.auto_period`), and an
exchange costs what the same cost model expects of it: finding the changes, the cheapest
allreduce with the given network constants, adding the mean; the allreduce's unions of
the ranks' changes are those measured (the columns of the rows of every rank taking
part), not the model's uniformly random supports. An epoch is its steps plus
its exchanges; the time to target is the epochs the target takes on P ranks times that.
"""

from dataclasses import replace

import numpy as np

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.datasets import make_url_like
from sparcml_apps.training import exchange_kernels
from sparcml_apps.training.exchange import Costs, auto_period, columns_of

SHAPES = {
    # rows, columns and mean nonzeros a row, from the LIBSVM datasets page
    "url": (2_396_130, 3_231_961, 116),
    "webspam-trigram": (350_000, 16_609_143, 3_728),
    "kdd2012": (149_639_105, 54_686_452, 11),
}
MEASURED_NONZEROS = 16_000_000
"""Nonzeros of the rows generated for each shape (at most; 2**8 to 2**20 rows)."""


def growth(n_features, nnz_per_row, nonzeros=MEASURED_NONZEROS, seed=0):
    """``(X, y, lengths, columns)``: generated rows of the shape (a power of two of them,
    at most ``nonzeros``' worth), and the distinct columns of their first
    ``lengths[i] = 2**i`` rows in a random order."""
    rows = 1 << min(20, max(8, (nonzeros // nnz_per_row).bit_length() - 1))
    X, y = make_url_like(rows, n_features, nnz_per_row, random_state=seed)
    order = np.random.default_rng(seed).permutation(rows).astype(np.int64)
    lengths = 1 << np.arange(rows.bit_length(), dtype=np.int64)
    columns, _ = exchange_kernels.union_growth(X.indptr, X.indices, order, lengths, n_features)
    return X, y, lengths, columns


def step_seconds(X, y):
    """Seconds of an epoch's steps per nonzero on one rank, with default options (the mean
    of epochs 2 and 3: averaging starts in the second)."""
    model = SparseSGDClassifier(loss="log_loss", max_iter=3, tol=None, random_state=0)
    model.fit(X, y)
    return float(np.mean([r["seconds"] for r in model.comm_stats_[1:]])) / X.nnz


def epochs_to_target(scaling, dataset="url-like", network="shm"):
    """``{P: epochs}`` to the target, from the summary of ``sparcml bench scaling``: where
    the mean curve of P ranks first reaches it, between epochs by linear interpolation."""
    found = {}
    for s in scaling["summary"]:
        if (s["system"], s["dataset"], s["network"]) != ("sparcml", dataset, network):
            continue
        epochs, accuracy = s["curve"]["epoch"], s["curve"]["accuracy"]
        before = (0, 0.0)
        for epoch, a in zip(epochs, accuracy, strict=True):
            if a >= s["target"]:
                e0, a0 = before
                found[s["nprocs"]] = e0 + (epoch - e0) * (s["target"] - a0) / (a - a0)
                break
            before = (epoch, a)
    return found


def project(shape, measured, constants, nprocs_list, epochs=None, cores=None, itemsize=None):
    """One record per P: the period ``auto`` picks, exchanges and seconds an epoch, bytes a
    rank sends an epoch, and the time to target (``epochs``: ``{P: epochs}`` measured; a
    P beyond them takes the epochs of the most ranks measured, 1 when there are none).
    ``shape``: a name in :data:`SHAPES`, or ``(rows, columns, nonzeros a row)``. Every
    rank has a core of its own, unless ``cores``: then P ranks share them. ``itemsize``: the
    bytes of a value exchanged (default: that of the estimators' ``exchange_dtype``)."""
    if itemsize is None:
        itemsize = np.dtype(SparseSGDClassifier().exchange_dtype).itemsize
    rows, n_features, nnz_per_row = SHAPES.get(shape, shape)
    lengths, columns, seconds_per_nonzero = measured
    records = []
    for nprocs in nprocs_list:
        steps = rows // nprocs  # one row a step, the default batch_size
        costs = Costs(
            size=n_features + 1, n_out=1, n_weights=n_features, nprocs=nprocs, itemsize=itemsize,
            index_itemsize=4, constants=constants,
        )  # fmt: skip
        period = entries = exchange = sent = 0
        if nprocs > 1:
            span = [min(steps, 1 << i) for i in range(64)]
            grown = [columns_of(lengths, columns, n, n_features) for n in span]
            period = auto_period(costs, grown, [n * nnz_per_row for n in span], steps)
            period_columns = columns_of(lengths, columns, period, n_features)
            entries = period_columns + 1  # and the intercept
            # the ranks' rows are more rows: the union of their changes grows as measured
            costs = replace(
                costs,
                union=lambda count, period=period: (
                    1 + columns_of(lengths, columns, count * period, n_features)
                ),
            )
            exchange = costs.exchange(period_columns, period * nnz_per_row)
            sent = costs.allreduce(entries).bytes_sent
        exchanges = -(-steps // period) if period else 0
        compute = steps * nnz_per_row * seconds_per_nonzero * max(1, nprocs / (cores or nprocs))
        epoch = compute + exchanges * exchange
        known = sorted(epochs or {})
        taken = (epochs or {}).get(nprocs) or (epochs[known[-1]] if known else 1.0)
        records.append(
            {
                "shape": shape if isinstance(shape, str) else f"{rows} rows",
                "nprocs": nprocs,
                "rows_per_rank": steps,
                "local_steps": period,
                "exchanges_per_epoch": exchanges,
                "entries_per_exchange": entries,
                "mb_sent_per_epoch": exchanges * sent / 1e6,
                "compute_seconds": compute,
                "exchange_seconds": exchanges * exchange,
                "epoch_seconds": epoch,
                "epochs_to_target": taken,
                "time_to_target": taken * epoch,
            }
        )
    one = records[0]["time_to_target"] if records[0]["nprocs"] == 1 else None
    for r in records:
        r["speedup"] = one / r["time_to_target"] if one else None
    return records
