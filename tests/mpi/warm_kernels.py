"""Compile the kernels of fits and of the collectives into numba's cache: small fits with
every option that takes other kernels or other argument types, on rank 0 alone, then
across the ranks (which load what rank 0 compiled), so that later jobs load them instead
of compiling them on every rank at the same time. Rank 1 naps meanwhile: its core is left
to whatever else compiles."""

import time
import warnings

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


world = MPI.COMM_WORLD
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if world.rank == 0:
        fits(MPI.COMM_SELF)
    done = world.Ibarrier()
    while not done.Test():
        time.sleep(0.01)
    fits(world)
