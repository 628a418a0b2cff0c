"""The benchmarks' figures (matplotlib, PNG), each drawn from a benchmark's records."""

import math
from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path, rect=(0, 0, 1, 1)):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    fig.clf()


def _log_x(ax):
    """Make the x axis of the lines drawn logarithmic, labelled in plain numbers at each
    power of ten, and at 2 and 5 times each where the lines span under 2.5 decades
    (matplotlib's own labels of the minor ticks overlap there); under half a decade,
    matplotlib's labels."""
    from matplotlib import ticker

    ax.set_xscale("log")
    low, high = ax.get_xlim()
    decades = math.log10(high / low)
    if decades < 0.5:
        return
    subs = (1.0, 2.0, 5.0) if decades < 2.5 else (1.0,)
    ax.xaxis.set_major_locator(ticker.LogLocator(subs=subs))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def projection(records, path):
    """Predicted step time against P, one panel a dataset, one line an algorithm."""
    plt = _pyplot()
    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.6), sharey=True)
    for ax, dataset in zip(axes, datasets, strict=True):
        mine = [r for r in records if r["dataset"] == dataset]
        for name in dict.fromkeys(r["algorithm"] for r in mine):
            points = [(r["nprocs"], r["seconds"]) for r in mine if r["algorithm"] == name]
            ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{dataset} (N = {mine[0]['size']:,})")
        ax.set_xlabel("ranks P")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("predicted allreduce time a step (s)")
    axes[0].legend(fontsize=8)
    _save(fig, path)


def projection_target(records, path):
    """Projected time to target against P, one panel a dataset shape, one line a network;
    and the ideal (one rank's time over P) dotted."""
    plt = _pyplot()
    shapes = list(dict.fromkeys(r["shape"] for r in records))
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.6))
    for ax, shape in zip(axes, shapes, strict=True):
        mine = [r for r in records if r["shape"] == shape]
        for network in dict.fromkeys(r["network"] for r in mine):
            points = [(r["nprocs"], r["time_to_target"]) for r in mine if r["network"] == network]
            ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=network)
        one = next(r["time_to_target"] for r in mine if r["nprocs"] == 1)
        ranks = sorted({r["nprocs"] for r in mine})
        ax.plot(ranks, [one / p for p in ranks], ":", color="gray", label="ideal")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(shape)
        ax.set_xlabel("ranks P")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("projected time to target (s)")
    axes[0].legend(fontsize=8)
    _save(fig, path)


def curves(records, path, title):
    """Test loss and accuracy against training seconds and against MB sent per rank, one
    line a method (scikit-learn sends nothing: it has no bytes panel line)."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5), sharey="row")
    for r in records:
        epochs = r["epochs"]
        seconds = [e["seconds"] for e in epochs]
        sent = [e["bytes_sent"] / 1e6 for e in epochs]
        style = {"marker": "o", "markersize": 3, "label": r["method"]}
        for row, key in enumerate(("test_loss", "accuracy")):
            values = [e[key] for e in epochs]
            axes[row, 0].plot(seconds, values, **style)
            if sent[-1] > 0:
                axes[row, 1].plot(sent, values, **style)
    for ax in axes.flat:
        _log_x(ax)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].set_ylabel("test loss")
    axes[1, 0].set_ylabel("test accuracy")
    axes[1, 0].set_xlabel("training seconds")
    axes[1, 1].set_xlabel("MB sent per rank")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=8)
    fig.suptitle(title)
    _save(fig, path, rect=(0, 0.08, 1, 1))


def allreduce_times(records, path):
    """Least allreduce time against density, one panel a (P, N), one line an algorithm."""
    plt = _pyplot()
    panels = list(dict.fromkeys((r["nprocs"], r["size"]) for r in records))
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    for ax, (nprocs, size) in zip(axes.flat, panels, strict=False):
        mine = [r for r in records if (r["nprocs"], r["size"]) == (nprocs, size)]
        for name in dict.fromkeys(r["algorithm"] for r in mine):
            points = sorted(
                (r["density"], r["best_seconds"] * 1e3) for r in mine if r["algorithm"] == name
            )
            ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"P = {nprocs}, N = 2^{size.bit_length() - 1}", fontsize=10)
        ax.set_xlabel("nonzeros per rank / N")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("least time (ms)")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    axes[0, 0].legend(fontsize=7)
    _save(fig, path)


def diagnostics(records, path):
    """gamma and xi against the step (one line a K, a running mean over 25 steps) and
    against K (median, with the 10th to 90th percentiles)."""
    import numpy as np

    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for r in records:
        for ax, key in zip(axes[:2], ("gamma", "xi"), strict=True):
            values = np.asarray(r[key])
            width = min(25, values.size)
            smooth = np.convolve(values, np.ones(width) / width, mode="valid")
            ax.plot(np.arange(smooth.size) + width, smooth, label=f"K = {r['topk']:g}")
    for ax, key in zip(axes[:2], ("gamma", "xi"), strict=True):
        ax.set_xlabel("step")
        ax.set_ylabel(key)
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    ks = [r["topk"] for r in records]
    for key, marker in (("gamma", "o"), ("xi", "s")):
        low, mid, high = (
            np.array([np.quantile(r[key], q) for r in records]) for q in (0.1, 0.5, 0.9)
        )
        axes[2].errorbar(ks, mid, yerr=[mid - low, high - mid], marker=marker, capsize=3, label=key)
    axes[2].set_xscale("log")
    axes[2].set_ylim(0, 1.02)
    axes[2].set_xlabel("K (fraction of the weights)")
    axes[2].grid(True, which="both", alpha=0.3)
    axes[2].legend(fontsize=8)
    _save(fig, path)


def peers(records, path, title):
    """Test accuracy against training seconds, and against seconds from start (start,
    load and training), one colour a system, solid for its defaults, dashed tuned; the
    target as a dotted line."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    target = records[0]["target"]
    lowest = target
    for number, r in enumerate(records):
        colour = f"C{number % 10}"
        before = r["start_seconds"] + r["load_seconds"]
        for run in r["runs"]:
            seconds = [p["seconds"] for p in run["points"]]
            accuracy = [p["accuracy"] for p in run["points"]]
            lowest = min(lowest, *accuracy)
            style = {
                "color": colour,
                "marker": "o",
                "markersize": 3,
                "linestyle": "-" if run["setting"] == "defaults" else "--",
                "label": f"{r['system']}, {run['setting']}",
            }
            axes[0].plot(seconds, accuracy, **style)
            axes[1].plot([s + before for s in seconds], accuracy, **style)
    for ax in axes:
        ax.axhline(target, color="black", linestyle=":", linewidth=1)
        _log_x(ax)
        ax.set_ylim(max(lowest, target - 0.1) - 0.005, None)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("test accuracy")
    axes[0].set_xlabel("training seconds")
    axes[1].set_xlabel("seconds from start (start, load and training)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=7)
    fig.suptitle(f"{title}: test accuracy against time (target dotted)")
    _save(fig, path, rect=(0, 0.17, 1, 1))


def scaling(summary, path, title):
    """Mean test accuracy against mean training seconds, one line a number of ranks (and
    scikit-learn's on one rank, dashed); the target as a dotted line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for s in summary:
        label = f"P = {s['nprocs']}" if s["system"] == "sparcml" else s["system"]
        style = "-" if s["system"] == "sparcml" else "--"
        curve = s["curve"]
        ax.plot(curve["seconds"], curve["accuracy"], style, marker="o", markersize=3, label=label)
    ax.axhline(summary[0]["target"], color="black", linestyle=":", linewidth=1)
    _log_x(ax)
    ax.set_xlabel("training seconds (mean over seeds)")
    ax.set_ylabel("test accuracy (mean over seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{title}: test accuracy against time (target dotted)", fontsize=10)
    _save(fig, path)


def speedup(rows, path, title):
    """Speedup over one rank against the ranks: the default fits, the fixed epochs and the
    same epochs with every rank alone (rows of the many-core scaling mode); ideal dotted."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ranks = [row["nprocs"] for row in rows]
    lines = {
        "default fit, hinge": "hinge_seconds",
        "default fit, log_loss": "log_loss_seconds",
        "fixed epochs": "sparcml_epochs_seconds",
        "fixed epochs, each rank alone": "alone_epochs_seconds",
    }
    for label, key in lines.items():
        one = rows[0][key]
        points = [(row["nprocs"], one / row[key]) for row in rows if row.get(key)]
        ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=label)
    ax.plot(ranks, ranks, ":", color="black", linewidth=1, label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("ranks")
    ax.set_ylabel("speedup over one rank (mean seconds over seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{title}: what each added rank buys", fontsize=10)
    _save(fig, path)


def epochs(summary, path, title):
    """Mean test accuracy after each epoch, one line a number of ranks and scikit-learn's."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for s in summary:
        name = f"sparcml, P = {s['nprocs']}" if s["system"] == "sparcml" else s["system"]
        curve = s["curve"]
        ax.plot(curve["epoch"], curve["accuracy"], marker="o", markersize=3, label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy (mean over seeds)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{title}: test accuracy after each epoch", fontsize=10)
    _save(fig, path)


def fullsize(records, path):
    """Rows a second a rank, and each rank's peak memory against its bound, by size and P."""
    plt = _pyplot()
    fig, (speed, memory) = plt.subplots(2, 1, figsize=(11, 6.5))
    labels, rates, peaks, bounds = [], [], [], []
    for s in records["sizes"]:
        runs = [(f"P={t['nprocs']} rank", t) for t in s["train"]]
        runs += [("Dask worker", s["dask"])] if "dask" in s else []
        runs += [("cgroup, rank", s["out_of_core"])] if "out_of_core" in s else []
        for kind, t in runs:
            pairs = zip(t["peak_rss_bytes"], t["bound_bytes"], strict=True)
            for rank, (peak, bound) in enumerate(pairs):
                labels.append(f"{s['rows'] / 1e6:.2g}M rows\n{kind} {rank}")
                rates.append(t["rows_per_second_per_rank"] / 1e3)
                peaks.append(peak / 1e9)
                bounds.append(bound / 1e9)
    at = range(len(labels))
    speed.bar(at, rates, color="tab:blue")
    speed.set_ylabel("thousand rows a second a rank")
    memory.bar(at, peaks, color="tab:orange", label="peak RSS")
    memory.scatter(at, bounds, color="black", marker="_", s=400, label="bound")
    memory.set_ylabel("GB")
    memory.legend(fontsize=8)
    for axis in (speed, memory):
        axis.set_xticks(list(at), labels, fontsize=7)
    _save(fig, path)
