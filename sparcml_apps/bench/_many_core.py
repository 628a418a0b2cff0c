"""The scaling benchmark on one machine of many cores (``--many-core``): what each added
rank buys, P = 1, 2, 4, ... up to the CPUs (a P above the cores marked: where a core
runs two hardware threads, its ranks share it).

For every P and seed (one job of ranks for each kind of fit at a P, every seed in it,
rather than one a seed): a fit with every default of each loss (hinge and log_loss:
seconds, epochs, test accuracy, and the exchanges and the share of the epochs' time the
ranks spent in them, waits for one another included), a fit of
``--epochs`` epochs (log_loss, ``tol=None``) and, for P > 1, the same epochs with every
rank alone on its own block of rows (no exchange: what the machine itself makes of P
processes, memory bandwidth included). For every P > 1 also the sparse allreduce
(``auto``) against MPI's dense ``Allreduce`` of :data:`ALLREDUCE_SIZE` float32 entries at
each of :data:`ALLREDUCE_DENSITIES`. One table (means over the seeds) and one plot of the
speedup over one rank against P.
"""

import json
import os
from pathlib import Path

import numpy as np

from .. import _mpiexec
from ._output import draw, write

RANKS_MODULE = "sparcml_apps.bench._scaling_ranks"
ALLREDUCE_MODULE = "sparcml_apps.bench._allreduce_ranks"
LOSSES = ("hinge", "log_loss")
ALLREDUCE_SIZE = 2**24
ALLREDUCE_DENSITIES = (0.001, 0.01)


def rank_counts(cores):
    """1, 2, 4, ... below ``cores``, and ``cores`` itself."""
    counts = [1 << i for i in range(cores.bit_length()) if 1 << i < cores]
    return counts + [cores]


def cores():
    """The CPUs this process may run on (hardware threads, where a core has several)."""
    return len(os.sched_getaffinity(0))


def physical_cores():
    """The cores under the CPUs this process may run on: CPUs that are threads of one core
    count once (as the kernel's ``core_cpus_list`` groups them; each CPU its own core
    where the kernel does not say)."""
    found = set()
    for cpu in os.sched_getaffinity(0):
        path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/core_cpus_list")
        found.add(path.read_text().strip() if path.exists() else str(cpu))
    return len(found)


def _ranks(nprocs, module, options):
    """The JSON records rank 0 of ``python -m module options`` on ``nprocs`` ranks printed."""
    done = _mpiexec.run_module(nprocs, module, [str(o) for o in options], timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed on {nprocs} ranks:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def fits(stems, nprocs, seeds, epochs):
    """The records of ``seeds`` at ``nprocs`` ranks: the default fits, the fixed epochs,
    alone (one job of ranks for each, every seed in it)."""
    data = ["--train", stems[0], "--test", stems[1], "--seeds", *seeds, "--epochs", epochs]
    records = []
    for loss in LOSSES:
        curve = [] if loss == "log_loss" else ["--no-curve"]
        records += _ranks(nprocs, RANKS_MODULE, [*data, "--loss", loss, "--defaults", *curve])
    if nprocs > 1:
        records += _ranks(nprocs, RANKS_MODULE, [*data, "--loss", "log_loss", "--alone"])
    return records


def allreduce(nprocs, repeat=5):
    """The sparse allreduce (auto) and MPI's dense one on ``nprocs`` ranks, by density."""
    options = ["--sizes", ALLREDUCE_SIZE, "--densities", *ALLREDUCE_DENSITIES,
               "--algorithms", "auto", "--repeat", repeat]  # fmt: skip
    return _ranks(nprocs, ALLREDUCE_MODULE, options)


def summarize(records, allreduces):
    """One row a P: means over the seeds."""
    rows = []
    for nprocs in sorted({r["nprocs"] for r in records}):
        row = {"nprocs": nprocs}
        mine = [r for r in records if r["nprocs"] == nprocs]
        for loss in LOSSES:
            runs = [r["defaults"] for r in mine if r["loss"] == loss and r["system"] == "sparcml"]
            for key in ("seconds", "epochs", "accuracy"):
                row[f"{loss}_{key}"] = float(np.mean([run[key] for run in runs]))
            if nprocs > 1:  # the share of the epochs' time spent in exchanges
                row[f"{loss}_exchanges_per_epoch"] = float(
                    np.mean([run["exchanges"] / run["epochs"] for run in runs])
                )
                row[f"{loss}_exchange_share"] = float(
                    np.mean([run["exchange_seconds"] / run["epoch_seconds"] for run in runs])
                )
        for system in ("sparcml", "alone"):
            runs = [r for r in mine if r["system"] == system and r.get("points")]
            if runs:
                row[f"{system}_epochs_seconds"] = float(
                    np.mean([r["points"][-1]["seconds"] for r in runs])
                )
        if nprocs == 1:  # one rank alone is the fit itself
            row["alone_epochs_seconds"] = row.get("sparcml_epochs_seconds")
        for density in ALLREDUCE_DENSITIES:
            cell = [
                r for r in allreduces
                if (r["nprocs"], r["density"], r["algorithm"]) == (nprocs, density, "auto")
            ]  # fmt: skip
            if cell:
                row[f"allreduce_{density}"] = cell[0]["speedup_vs_dense"]
                row[f"allreduce_{density}_ms"] = cell[0]["seconds"] * 1e3
        rows.append(row)
    return rows


def report(rows, epochs, seeds, n_cpus, n_cores):
    """The rows as one Markdown table, against one rank; a P above ``n_cores`` is marked:
    its ranks share cores' hardware threads."""
    one = rows[0]
    lines = [
        f"Means over {seeds} seeds on {n_cpus} CPUs of {n_cores} cores; fixed epochs: "
        f"{epochs} (log_loss); allreduce: {ALLREDUCE_SIZE:,} float32 entries, sparse (auto) "
        "against MPI's dense Allreduce.",
        "",
        "| P | default fit, hinge: s (epochs), accuracy | against 1 rank "
        "| default fit, log_loss: s (epochs), accuracy | against 1 rank "
        "| default fits: exchanges an epoch, share of the time in them (hinge; log_loss) "
        "| fixed epochs: s | alone: s | fixed / alone "
        + "".join(f"| allreduce {d:.1%}: ms, x dense " for d in ALLREDUCE_DENSITIES)
        + "|",
        "|---|---|---|---|---|---|---|---|---|" + "---|" * len(ALLREDUCE_DENSITIES),
    ]
    for row in rows:
        cells = [str(row["nprocs"]) + (" (threads)" if row["nprocs"] > n_cores else "")]
        for loss in LOSSES:
            seconds = row[f"{loss}_seconds"]
            cells += [
                f"{seconds:.2f} ({row[f'{loss}_epochs']:.1f}), {row[f'{loss}_accuracy']:.4f}",
                f"{seconds / one[f'{loss}_seconds']:.2f}x",
            ]
        cells.append(
            "; ".join(
                f"{row[f'{loss}_exchanges_per_epoch']:.0f}, {row[f'{loss}_exchange_share']:.0%}"
                for loss in LOSSES
            )
            if row["nprocs"] > 1
            else ""
        )
        fixed, alone = row.get("sparcml_epochs_seconds"), row.get("alone_epochs_seconds")
        cells += [_seconds(fixed), _seconds(alone)]
        cells.append(f"{fixed / alone:.2f}x" if fixed and alone else "")
        for density in ALLREDUCE_DENSITIES:
            speedup = row.get(f"allreduce_{density}")
            cells.append(
                "" if speedup is None else f"{row[f'allreduce_{density}_ms']:.2f}, {speedup:.1f}x"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _seconds(value):
    return "" if value is None else f"{value:.2f}"


def run(args, stems, name):
    """The whole mode on the rows of ``stems``: records, table, plot; returns 0."""
    n_cpus, n_cores = cores(), physical_cores()
    counts = rank_counts(n_cpus)
    records, allreduces = [], []
    for nprocs in counts:
        for record in fits(stems, nprocs, range(args.seeds), args.epochs):
            records.append({**record, "dataset": name})
            print(_progress(record), flush=True)
    for nprocs in counts[1:]:
        allreduces += allreduce(nprocs)
    rows = summarize(records, allreduces)
    text = report(rows, args.epochs, args.seeds, n_cpus, n_cores)
    print(f"\n{text}")
    write(args.out, "scaling-many-core", {"records": records, "allreduce": allreduces,
          "summary": rows, "cpus": n_cpus, "cores": n_cores}, text)  # fmt: skip
    title = f"{name}, {n_cpus} CPUs of {n_cores} cores"
    draw("speedup", rows, args.out / "scaling-many-core.png", title)
    return 0


def _progress(record):
    done = record.get("defaults")
    what = f"default fit {done['epochs']} epochs, {done['seconds']:.2f} s" if done else ""
    if record.get("points"):
        last = record["points"][-1]
        what += f"{', ' if what else ''}{last['epoch']} epochs in {last['seconds']:.2f} s"
    return f"P={record['nprocs']} {record['system']} {record['loss']} seed {record['seed']}: {what}"
