"""The demo behind ``make demo``: SparseSGDClassifier on 4 MPI ranks, synthetic url data.

Runs ``sparcml train --ranks 4`` on 200,000 rows shaped like LIBSVM's ``url`` (3.2
million columns, about 116 nonzeros a row; a fifth of each rank's rows held out for
testing) and shows the test accuracy, the time, and the bytes the ranks' allreduces sent
next to what a dense allreduce of the whole model at the same exchanges would have sent.
The model and the metrics go to ``results/demo/`` (or the directory given as the
argument).
"""

import sys
from pathlib import Path

from sparcml_apps.cli.main import main as sparcml

RANKS = 4
ARGUMENTS = ["--rows", "200000", "--epochs", "5", "--batch-size", "128", "--loss", "log_loss"]


def main(argv=None):
    results = Path(argv[0] if argv else "results/demo")
    print(
        f"sparcml demo: SparseSGDClassifier on {RANKS} MPI ranks, synthetic url-like data "
        "(the first run compiles the numba kernels)",
        flush=True,
    )
    return sparcml(
        [
            "train",
            "--ranks",
            str(RANKS),
            *ARGUMENTS,
            "--model",
            str(results / "model.joblib"),
            "--metrics",
            str(results / "metrics.json"),
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
