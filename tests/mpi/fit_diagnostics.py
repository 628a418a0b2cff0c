"""Each rank fits its block of rows with TopK diagnostics on and off, for several option
sets; rank 0 saves what was recorded and every rank's dense acc_p and sent_p of every step.

Arguments: data .npz (X as CSR parts; y2 in +-1, y3 class indices), output .npz, block
boundaries (comma separated), then a Python literal: a list of option dicts, each with
"classes" (2 or 3). Exits 1 if a model with diagnostics differs in any bit from the one
without, or a rank's model or diagnostics differ from rank 0's.
"""

import ast
import sys

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from sparcml_apps import SparseSGDClassifier
from sparcml_apps.training import exchange

comm = MPI.COMM_WORLD
data_path, output, bounds, configs = sys.argv[1:]
data = np.load(data_path)
X = sp.csr_matrix((data["data"], data["indices"], data["indptr"]), shape=tuple(data["shape"]))
bounds = [int(b) for b in bounds.split(",")]
mine = slice(bounds[comm.rank], bounds[comm.rank + 1])

seen = []  # this rank's dense (acc_p, sent_p) of every exchange, as TopK worked on them
diagnose = exchange._diagnose


def watched_diagnose(accumulated, sent, k, n_weights, comm):
    acc = np.zeros(n_weights)
    acc[accumulated.indices] = accumulated.values
    kept = sent.indices < n_weights
    taken = np.zeros(n_weights)
    taken[sent.indices[kept]] = sent.values[kept]
    seen.append((acc, taken))
    return diagnose(accumulated, sent, k, n_weights, comm)


exchange._diagnose = watched_diagnose


def fail(message):
    print(f"rank {comm.rank}: {message}", flush=True)
    sys.exit(1)


saved = {}
for number, options in enumerate(ast.literal_eval(configs)):
    options = dict(options)
    y = data[f"y{options.pop('classes')}"]
    plain = SparseSGDClassifier(comm=comm, **options).fit(X[mine], y[mine])
    seen.clear()
    model = SparseSGDClassifier(comm=comm, diagnostics=True, **options).fit(X[mine], y[mine])
    for name in ("coef_", "intercept_"):
        if getattr(model, name).tobytes() != getattr(plain, name).tobytes():
            fail(f"options {number}: {name} differs with diagnostics")
    gamma = np.concatenate([record["gamma"] for record in model.comm_stats_])
    xi = np.concatenate([record["xi"] for record in model.comm_stats_])
    everything = np.concatenate([model.coef_.ravel(), model.intercept_, gamma, xi])
    if comm.bcast(everything, root=0).tobytes() != everything.tobytes():
        fail(f"options {number}: the model or the diagnostics differ from rank 0's")
    everyone = comm.gather(np.array(seen), root=0)  # per rank: (exchanges, 2, n_weights)
    if comm.rank == 0:
        saved[f"acc_{number}"] = np.stack([steps[:, 0] for steps in everyone], axis=1)
        saved[f"sent_{number}"] = np.stack([steps[:, 1] for steps in everyone], axis=1)
        saved[f"gamma_{number}"], saved[f"xi_{number}"] = gamma, xi
        saved[f"coef_{number}"], saved[f"intercept_{number}"] = model.coef_, model.intercept_
if comm.rank == 0:
    np.savez(output, **saved)
