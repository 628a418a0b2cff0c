"""Fits at a fixed seed give the models stored in tests/data/stored_models.npz, bit for
bit: a change that means to leave training alone (a reorganization, say) must leave
these alone. A change that means to change a model stores them again, saying so:
``python tests/test_stored_models.py --store``."""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor
from sparcml_apps.datasets import make_url_like

STORED = Path(__file__).parent / "data" / "stored_models.npz"


def url_like(rows):
    return make_url_like(rows, 20_000, 40, random_state=4)


CASES = {
    "hinge-averaged": (lambda: SparseSGDClassifier(random_state=0), lambda: url_like(3000)),
    "held-out-rows": (  # early_stopping="auto" holds rows out at 10,000 rows and more
        lambda: SparseSGDClassifier(loss="log_loss", random_state=1),
        lambda: url_like(12_000),
    ),
    "multiclass-elasticnet": (
        lambda: SparseSGDClassifier(loss="log_loss", penalty="elasticnet", random_state=2),
        lambda: make_classification(600, 30, n_informative=8, n_classes=3, random_state=0),
    ),
    "topk-batches": (
        lambda: SparseSGDClassifier(
            compression="topk", topk=0.05, batch_size=4, max_iter=5, tol=None, random_state=3
        ),
        lambda: url_like(2000),
    ),
    "huber-l1-regressor": (
        lambda: SparseSGDRegressor(loss="huber", penalty="l1", max_iter=50, random_state=4),
        lambda: make_regression(500, 20, noise=1.0, random_state=0),
    ),
}


def fit(name):
    make, data = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().fit(*data())
    return {
        f"{name}/coef": model.coef_,
        f"{name}/intercept": model.intercept_,
        f"{name}/n_iter": np.array(model.n_iter_),
    }


@pytest.mark.parametrize("name", list(CASES))
def test_a_fit_gives_the_stored_model(name):
    stored = np.load(STORED)
    for key, value in fit(name).items():
        assert value.dtype == stored[key].dtype and value.shape == stored[key].shape, key
        assert value.tobytes() == stored[key].tobytes(), key


if __name__ == "__main__" and sys.argv[1:] == ["--store"]:
    arrays = {}
    for case in CASES:
        arrays.update(fit(case))
    np.savez_compressed(STORED, **arrays)
    print(f"stored {len(CASES)} models in {STORED}")
