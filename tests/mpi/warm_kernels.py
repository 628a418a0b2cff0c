"""Compile the kernels of fits and of the collectives into numba's cache, so that later
jobs load them instead of compiling them on every rank at the same time: rank 0 makes
small fits with every option that takes other kernels or other argument types, alone,
while rank 1 compiles the kernels of the collectives, the parser and the generator; then
the same fits across the ranks (which load what the ranks compiled)."""

import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor

OPTIONS = [
    {},
    {"loss": "log_loss", "average": True},
    {"penalty": "l1"},
    {"penalty": "elasticnet", "batch_size": 8},
    {"compression": "topk", "topk": 0.1},
    {"compression": "topk", "topk": 0.1, "diagnostics": True, "error_feedback": False},
    {"overlap": True},
    {"quantization_bits": 4},
    {"learning_rate": "adaptive", "eta0": 0.1},
    {"early_stopping": True},
    {"local_steps": 1},
    {"class_weight": "balanced"},
]

rng = np.random.default_rng(0)
X = sp.random(240, 300, density=0.05, format="csr", random_state=0)
y = np.where(rng.standard_normal(240) > 0, 1.0, -1.0)
classes = np.arange(240) % 3
weight = rng.uniform(0.5, 2.0, 240)


def fits(comm):
    common = {"max_iter": 2, "tol": None, "random_state": 0, "comm": comm}
    for options in OPTIONS:
        SparseSGDClassifier(**common, **options).fit(X, y)
    SparseSGDClassifier(**common).fit(X, y, sample_weight=weight)
    SparseSGDClassifier(**common, average=True).fit(X, classes)
    SparseSGDClassifier(**common).partial_fit(X, classes, classes=[0, 1, 2])
    SparseSGDRegressor(**common).fit(X, y)
    SparseSGDRegressor(**common, penalty="l1", average=True).fit(X, y, sample_weight=weight)


def other_kernels():
    """The collectives' merges for every value and index type, the parser, the generator."""
    from collectives._kernels import accumulate, merge_add, merge_runs
    from sparcml_apps.datasets import load_svmlight, make_url_like

    for dtype in (np.float32, np.float64):
        for index in (np.uint32, np.uint64):
            i = np.arange(3, dtype=index)
            v = np.ones(3, dtype)
            merge_add(i, v, i, v)
            merge_runs(i, v, np.array([0, 1, 3], np.int64))
            accumulate(i, v, 0, np.zeros(3, dtype))
    with tempfile.TemporaryDirectory() as folder:
        rows = Path(folder) / "rows.svm"
        rows.write_text("1 1:0.5 3:1e-3\n-1 2:2.25 4:123456789.123456789\n")
        load_svmlight(rows)
    make_url_like(10, 100, random_state=0, planted="dense")


world = MPI.COMM_WORLD
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if world.rank == 0:
        fits(MPI.COMM_SELF)
    else:
        other_kernels()
    done = world.Ibarrier()
    while not done.Test():
        time.sleep(0.01)
    fits(world)
