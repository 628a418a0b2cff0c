"""The training arithmetic against a plain numpy implementation of the documented steps."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from topk_reference import reference_topk_fit, sparse_problem

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor


def log_loss_slope(p, y):
    return -y / (np.exp(p * y) + 1.0)


def reference_fit(
    X,
    y,
    *,
    alpha,
    l1_ratio,
    batch,
    epochs,
    average,
    intercept_decay,
    loss="log_loss",
    learning_rate="optimal",
    eta0=0.01,
    power_t=0.5,
    delayed=False,
):
    """Mini-batch SGD as training.py documents it: one rank, rows in file order. With
    ``delayed``, a step's gradient is taken before the step before it is applied."""
    n, width = X.shape
    w = np.zeros(width)
    b = 0.0
    t = 1.0
    l1_total = 0.0
    l1_applied = np.zeros(width)
    sums, intercept_sum, steps = np.zeros(width), 0.0, 0
    typical = math.sqrt(1.0 / math.sqrt(alpha))
    if loss == "log_loss":
        slope = log_loss_slope
        t0 = batch / (typical / max(1.0, abs(slope(-typical, 1.0))) * alpha)
    else:  # squared_error

        def slope(p, y):
            return p - y

        t0 = 0.0

    def clip(j):
        z = w[j]
        if z > 0:
            w[j] = max(0.0, z - (l1_total + l1_applied[j]))
        elif z < 0:
            w[j] = min(0.0, z + (l1_total - l1_applied[j]))
        l1_applied[j] += w[j] - z

    def apply(rows, coef, eta):
        nonlocal w, b, t, l1_total, sums, intercept_sum, steps
        g = rows.shape[0]
        w *= max(0.0, 1.0 - eta * alpha * (1 - l1_ratio)) ** g
        l1_total += eta * alpha * l1_ratio * g
        touched = np.unique(rows.indices)
        w -= rows.T @ coef
        b -= coef.sum() * intercept_decay
        if l1_ratio > 0:
            for j in touched:
                clip(j)
        if average:
            sums += w
            intercept_sum += b
            steps += 1
        t += g

    for _ in range(epochs):
        pending = None
        for start in range(0, n, batch):
            rows = X[start : start + batch]
            if learning_rate == "optimal":
                eta = 1.0 / (alpha * (t0 + t - 1.0))
            elif learning_rate == "constant":
                eta = eta0
            else:
                eta = eta0 / t**power_t
            coef = eta * slope(rows @ w + b, y[start : start + batch])
            if pending is not None:
                apply(*pending)
            pending = rows, coef, eta
            if not delayed:
                apply(*pending)
                pending = None
        if pending is not None:
            apply(*pending)
        if l1_ratio > 0:
            for j in range(width):
                clip(j)
    if average:
        return sums / steps, intercept_sum / steps
    return w, b


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=300, n_features=40, n_informative=10, random_state=0)
    X[np.abs(X) < 0.8] = 0.0  # sparse rows
    return sp.csr_matrix(X), np.where(y == 1, 1.0, -1.0)


@pytest.mark.parametrize("batch", [1, 7, 64])
@pytest.mark.parametrize(
    ("penalty", "l1_ratio", "average"),
    [("l2", 0.0, False), ("elasticnet", 0.4, False), ("l1", 1.0, False), ("l2", 0.0, True)],
)
@pytest.mark.parametrize("compression", [None, "topk"])
def test_steps_follow_the_documented_arithmetic(
    data, batch, penalty, l1_ratio, average, compression
):
    X, y = data
    # topk=1.0 keeps every entry: the allreduce path with nothing dropped. A small constant
    # rate keeps the steps contracting, so rounding differences stay at rounding level.
    model = SparseSGDClassifier(
        loss="log_loss",
        penalty=penalty,
        alpha=0.01,
        l1_ratio=l1_ratio,
        batch_size=batch,
        max_iter=3,
        tol=None,
        shuffle=False,
        average=average,
        compression=compression,
        topk=1.0,
        learning_rate="constant",
        eta0=0.01,
    ).fit(X, y)
    w, b = reference_fit(
        X,
        y,
        alpha=0.01,
        l1_ratio=l1_ratio,
        batch=batch,
        epochs=3,
        average=average,
        intercept_decay=0.01,
        learning_rate="constant",
        eta0=0.01,
    )
    np.testing.assert_allclose(model.coef_.ravel(), w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.intercept_, [b], rtol=1e-12, atol=1e-14)
    if penalty == "l1":
        assert np.sum(model.coef_ == 0) > 0  # the penalty truncates weights to zero


@pytest.mark.parametrize("batch", [1, 16])
def test_optimal_schedule_scales_t0_by_the_batch(data, batch):
    # large early steps amplify rounding differences: agreement to 1e-5, not 1e-12
    X, y = data
    model = SparseSGDClassifier(
        loss="log_loss", alpha=0.01, batch_size=batch, max_iter=2, tol=None, shuffle=False
    ).fit(X, y)
    w, b = reference_fit(
        X,
        y,
        alpha=0.01,
        l1_ratio=0.0,
        batch=batch,
        epochs=2,
        average=False,
        intercept_decay=0.01,
    )
    np.testing.assert_allclose(model.coef_.ravel(), w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(model.intercept_, [b], rtol=1e-5, atol=1e-7)


def test_regressor_invscaling_follows_the_arithmetic(data):
    X, _ = data
    target = X @ np.linspace(-1, 1, X.shape[1]) + 0.5
    model = SparseSGDRegressor(
        batch_size=5, max_iter=2, tol=None, shuffle=False, eta0=0.01, power_t=0.25
    ).fit(X, target)
    w, b = reference_fit(
        X,
        target,
        alpha=1e-4,
        l1_ratio=0.0,
        batch=5,
        epochs=2,
        average=False,
        intercept_decay=0.01,
        loss="squared_error",
        learning_rate="invscaling",
        power_t=0.25,
    )
    np.testing.assert_allclose(model.coef_.ravel(), w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.intercept_, [b], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize(
    ("penalty", "l1_ratio", "average"), [("l2", 0.0, False), ("l1", 1.0, True)]
)
def test_overlap_delays_each_gradient_by_one_step(data, batch, penalty, l1_ratio, average):
    X, y = data
    options = dict(
        loss="log_loss", penalty=penalty, alpha=0.01, l1_ratio=l1_ratio, batch_size=batch,
        max_iter=3, tol=None, shuffle=False, average=average, learning_rate="constant",
        eta0=0.01,
    )  # fmt: skip
    model = SparseSGDClassifier(overlap=True, **options).fit(X, y)
    w, b = reference_fit(
        X, y, alpha=0.01, l1_ratio=l1_ratio, batch=batch, epochs=3, average=average,
        intercept_decay=0.01, learning_rate="constant", eta0=0.01, delayed=True,
    )  # fmt: skip
    np.testing.assert_allclose(model.coef_.ravel(), w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.intercept_, [b], rtol=1e-12, atol=1e-14)
    undelayed = SparseSGDClassifier(**options).fit(X, y)
    assert not np.allclose(model.coef_, undelayed.coef_, rtol=1e-6)


@pytest.mark.parametrize(
    ("error_feedback", "overlap"), [(True, False), (False, False), (True, True)]
)
def test_topk_diagnostics_follow_a_numpy_replay(error_feedback, overlap):
    X, y = sparse_problem()
    k, batch, epochs = 8, 8, 2
    model = SparseSGDClassifier(
        loss="log_loss", alpha=0.01, batch_size=batch, max_iter=epochs, tol=None,
        shuffle=False, compression="topk", topk=k, error_feedback=error_feedback,
        overlap=overlap, diagnostics=True, learning_rate="constant", eta0=0.05,
    ).fit(X, y)  # fmt: skip
    w, b, gammas, xis = reference_topk_fit(
        [(X, y)], alpha=0.01, eta0=0.05, batch=batch, epochs=epochs, k=k,
        intercept_decay=0.01, error_feedback=error_feedback, delayed=overlap,
    )  # fmt: skip
    np.testing.assert_allclose(model.coef_.ravel(), w, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(model.intercept_, [b], rtol=1e-9, atol=1e-14)
    for record, gamma, xi in zip(model.comm_stats_, gammas, xis, strict=True):
        assert len(record["gamma"]) == len(record["xi"]) == record["steps"] == len(gamma)
        np.testing.assert_allclose(record["gamma"], gamma, rtol=1e-9, atol=0)
        # one rank: the sum of the TopKs is the TopK of the sum
        np.testing.assert_allclose(record["xi"], xi, rtol=0, atol=1e-15)
    every_gamma = np.concatenate(gammas)
    assert 0.3 < every_gamma.min() and every_gamma.max() < 1  # TopK really drops entries
