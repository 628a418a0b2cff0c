"""The benchmarks' figures (matplotlib, PNG), each drawn from a benchmark's records."""

from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    fig.clf()


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
