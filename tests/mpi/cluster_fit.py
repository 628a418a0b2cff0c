"""Dask on MPI: fits on Dask arrays on the workers of this job; rank 1 saves the models.

Arguments: a9a, a9a.t, output .npz, the seed.
"""

import sys

from sparcml_apps import cluster

cluster.initialize()  # only the client rank returns

import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from distributed import Client  # noqa: E402

from sparcml_apps import SparseSGDClassifier  # noqa: E402
from sparcml_apps.datasets import load_dask, load_svmlight  # noqa: E402

train, test, output, seed = sys.argv[1:]
client = Client()
Xt, yt = load_svmlight(test, n_features=123)
saved = {}

# one chunk a worker, parsed by the workers from byte ranges of the file
X, y = load_dask(train, n_features=123)
options = {"loss": "log_loss", "average": True, "max_iter": 5, "tol": None}
model = SparseSGDClassifier(random_state=int(seed), **options).fit(X, y)
saved["a9a"] = np.concatenate([model.coef_.ravel(), model.intercept_])
print(f"a9a: accuracy {model.score(Xt, yt):.4f} after {model.n_iter_} epochs", flush=True)

# two chunks for three workers: one (or two) of them train with no rows
Xs, ys = load_svmlight(train, n_features=123)
half = -(-Xs.shape[0] // 2)
X2 = da.from_array(Xs, chunks=(half, 123), asarray=False)
X2, y2 = client.persist([X2, da.from_array(ys, chunks=half)])
for name in ("halves", "halves_again"):
    model = SparseSGDClassifier(random_state=int(seed), **options).fit(X2, y2)
    saved[name] = np.concatenate([model.coef_.ravel(), model.intercept_])
print(f"two chunks: accuracy {model.score(Xt, yt):.4f}", flush=True)

# sample weights with workers that hold no chunk (they take part with empty weights)
weight = np.random.default_rng(0).uniform(0.5, 2.0, Xs.shape[0])
weights = da.from_array(weight, chunks=half)
model = SparseSGDClassifier(random_state=int(seed), **options).fit(X2, y2, sample_weight=weights)
saved["halves_weighted"] = np.concatenate([model.coef_.ravel(), model.intercept_])
print(f"two chunks, weighted: accuracy {model.score(Xt, yt):.4f}", flush=True)

np.savez(output, **saved)
