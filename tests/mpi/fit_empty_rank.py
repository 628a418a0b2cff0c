"""Rank 1 holds no rows; the others split the data. Prints the model's test accuracy, a
digest of its bytes, the digest of the same fit given sample weights of one (rank 1 then
passes an empty array), and the classes, on every rank. With argument "none", no rank
holds rows."""

import hashlib
import sys

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

from sparcml_apps import SparseSGDClassifier

comm = MPI.COMM_WORLD
X, y = make_classification(n_samples=2000, n_features=20, random_state=0)
labels = np.array(["no", "yes"])[y]
if len(sys.argv) > 1 and sys.argv[1] == "none":
    mine = slice(0, 0)
elif comm.rank == 1:
    mine = slice(0, 0)
else:
    others = [r for r in range(comm.size) if r != 1]
    part = others.index(comm.rank)
    mine = slice(part * 1500 // len(others), (part + 1) * 1500 // len(others))


def digest(model):
    return hashlib.sha256(model.coef_.tobytes() + model.intercept_.tobytes()).hexdigest()


try:
    model = SparseSGDClassifier(comm=comm, random_state=0).fit(X[mine], labels[mine])
    ones = np.ones(2000)[mine]
    weighted = SparseSGDClassifier(comm=comm, random_state=0)
    weighted.fit(X[mine], labels[mine], sample_weight=ones)
except ValueError as exc:
    print("ValueError:", exc)
else:
    score = model.score(X[1500:], labels[1500:])
    print(f"{score:.4f} {digest(model)} {digest(weighted)} {[str(c) for c in model.classes_]}")
