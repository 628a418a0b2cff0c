"""Each rank fits its block of rows, for several option sets; rank 0 saves the models.

Arguments: data .npz (X as CSR parts, y, target), output .npz, block boundaries (comma
separated), then a Python literal: a list of option dicts (estimator parameters, and
"regressor" and "list_below", which sets ``exchange.LIST_BELOW``). Exits 1 if a rank's model
differs in any bit from rank 0's. Also saves whether, at the end of each fit, every rank's
copy of the model was the agreed model, the state keeping no copy of that after it.
"""

import ast
import sys

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor
from sparcml_apps.training import Weights, exchange

comm = MPI.COMM_WORLD
data_path, output, bounds, configs = sys.argv[1:]
data = np.load(data_path)
X = sp.csr_matrix((data["data"], data["indices"], data["indptr"]), shape=tuple(data["shape"]))
bounds = [int(b) for b in bounds.split(",")]
mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
saved = {}
agreed_at_end = []
drop_agreed = Weights.drop_agreed


def recording(weights):
    """:meth:`Weights.drop_agreed`, noting whether the copy is the agreed model."""
    agreed_at_end.append(
        np.array_equal(weights.v, weights.agreed)
        and np.array_equal(weights.intercept, weights.agreed_intercept)
    )
    drop_agreed(weights)


Weights.drop_agreed = recording
for number, options in enumerate(ast.literal_eval(configs)):
    options = dict(options)
    regressor = options.pop("regressor", False)
    # the changes found from a list of touched weights (inf), or by a pass over the model (0)
    exchange.LIST_BELOW = options.pop("list_below", exchange.LIST_BELOW)
    y = data["target" if regressor else "y"]
    estimator = SparseSGDRegressor if regressor else SparseSGDClassifier
    model = estimator(comm=comm, **options).fit(X[mine], y[mine])
    everything = np.concatenate([model.coef_.ravel(), np.ravel(model.intercept_)])
    if comm.bcast(everything, root=0).tobytes() != everything.tobytes():
        print(f"rank {comm.rank}: options {number}: the model differs from rank 0's", flush=True)
        sys.exit(1)
    kept = model._weights.agreed.size + model._weights.agreed_intercept.size
    everywhere = all(comm.allgather(len(agreed_at_end) == number + 1 and agreed_at_end[-1]))
    if comm.rank == 0:
        saved[f"agreed_at_end_{number}"] = everywhere and kept == 0
        saved[f"coef_{number}"], saved[f"intercept_{number}"] = model.coef_, model.intercept_
        saved[f"exchanges_{number}"] = [record["exchanges"] for record in model.comm_stats_]
        saved[f"bytes_{number}"] = sum(r["allreduce_bytes_sent"] for r in model.comm_stats_)
if comm.rank == 0:
    np.savez(output, **saved)
