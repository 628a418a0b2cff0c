"""The held-out rows' score, and the standard error of the difference of two scores of
them, against numpy on the same rows (classifier and regressor)."""

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from sparcml_apps import training
from sparcml_apps.training import holdout


def rows(classifier, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(400, 30, density=0.2, random_state=seed, format="csr")
    y = np.where(rng.random(400) < 0.4, 1.0, -1.0) if classifier else rng.normal(size=400)
    weight = rng.uniform(0.5, 2.0, 400)
    return X, y, weight


def setup_of(classifier):
    return SimpleNamespace(
        n_out=1, n_features=30, average=0, classifier=classifier, multiclass=False
    )


def model(seed):
    rng = np.random.default_rng(seed)
    return training.Weights(rng.normal(size=30), rng.normal(size=1))


def values(X, y, weights, classifier):
    scores = X @ weights.v + weights.intercept[0]
    if classifier:
        return (np.where(scores > 0, 1.0, -1.0) == y).astype(float)
    return (scores - y) ** 2


@pytest.mark.parametrize("classifier", [True, False], ids=["classifier", "regressor"])
def test_the_score_and_the_noise_of_its_difference(classifier):
    X, y, weight = rows(classifier)
    setup = setup_of(classifier)
    held = holdout.HeldOut(X, y, weight, setup, MPI.COMM_SELF)
    now = model(2)
    sums = held.sums(now)
    mine = values(X, y, now, classifier)
    total = weight.sum()
    if classifier:
        scale = total
        expected = weight @ mine / total
    else:
        scale = weight @ y**2 - (weight @ y) ** 2 / total
        expected = 1 - weight @ mine / scale
    assert holdout.score(sums, setup) == pytest.approx(expected)
    # two models' scores of these rows, each the weighted sum of independent rows' values
    spread = np.sqrt(np.sum(weight**2 * (mine - weight @ mine / total) ** 2))
    assert holdout.noise(sums, setup) == pytest.approx(np.sqrt(2) * spread / scale)


@pytest.mark.parametrize("n_strata", [1, 2, 5])
def test_each_stratum_holds_out_its_rows_of_smallest_key(n_strata):
    strata = np.random.default_rng(n_strata).integers(n_strata, size=5000)
    held = holdout.held_out(strata, n_strata, 0.1, 3, MPI.COMM_SELF, most=400)
    wanted = holdout._held_counts(np.bincount(strata, minlength=n_strata), 0.1, most=400)
    keys = holdout._keys(0, strata.size, 3)  # each row's key, by its number
    assert held.sum() == 400
    for stratum in range(n_strata):
        rows = np.flatnonzero(strata == stratum)
        expected = np.sort(rows[np.argsort(keys[rows])[: wanted[stratum]]])
        assert np.array_equal(np.flatnonzero(held & (strata == stratum)), expected)
