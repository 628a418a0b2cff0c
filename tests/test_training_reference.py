"""The training arithmetic of one process against a plain numpy replay of the documented
steps (tests/local_sgd_reference.py); tests/test_training_mpi.py does the same on ranks."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from local_sgd_reference import reference_fit, sparse_problem
from sklearn.datasets import make_classification

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor
from sparcml_apps.training import exchange


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=300, n_features=40, n_informative=10, random_state=0)
    X[np.abs(X) < 0.8] = 0.0  # sparse rows
    return sp.csr_matrix(X), np.where(y == 1, 1.0, -1.0)


def check_close(model, w, b, rtol=1e-12, atol=1e-14):
    np.testing.assert_allclose(model.coef_.ravel(), w, rtol=rtol, atol=atol)
    np.testing.assert_allclose(model.intercept_, [b], rtol=rtol, atol=atol)


@pytest.mark.parametrize("batch", [1, 7, 64])
@pytest.mark.parametrize(
    ("penalty", "l1_ratio", "average"),
    [("l2", 0.0, False), ("elasticnet", 0.4, False), ("l1", 1.0, False), ("l2", 0.0, True)],
)
def test_steps_follow_the_documented_arithmetic(data, batch, penalty, l1_ratio, average):
    X, y = data
    # A small constant rate keeps the steps contracting, so rounding differences stay at
    # rounding level.
    options = dict(alpha=0.01, l1_ratio=l1_ratio, batch_size=batch, average=average)
    model = SparseSGDClassifier(
        loss="log_loss", penalty=penalty, max_iter=3, tol=None, shuffle=False,
        learning_rate="constant", eta0=0.01, **options,
    ).fit(X, y)  # fmt: skip
    w, b, *_ = reference_fit(
        [(X, y)], alpha=0.01, l1_ratio=l1_ratio, batch=batch, epochs=3, average=int(average)
    )
    check_close(model, w, b)
    if penalty == "l1":
        assert np.sum(model.coef_ == 0) > 0  # the penalty truncates weights to zero


@pytest.mark.parametrize(("period", "overlap"), [(1, False), (5, False), (5, True)])
@pytest.mark.parametrize(
    ("penalty", "l1_ratio", "average"), [("l2", 0.0, False), ("l1", 1.0, True)]
)
@pytest.mark.parametrize("list_below", [0, np.inf])
def test_exchanges_of_one_rank_follow_the_arithmetic(
    data, period, overlap, penalty, l1_ratio, average, list_below, monkeypatch
):
    # TopK keeping every weight: one rank takes the path of several, exchanging its changes
    # (found from a list of the weights touched, or by a pass over the model)
    monkeypatch.setattr(exchange, "LIST_BELOW", list_below)
    X, y = data
    model = SparseSGDClassifier(
        loss="log_loss", penalty=penalty, alpha=0.01, l1_ratio=l1_ratio, batch_size=4,
        max_iter=3, tol=None, shuffle=False, average=average, learning_rate="constant",
        eta0=0.01, compression="topk", topk=1.0, local_steps=period, overlap=overlap,
    ).fit(X, y)  # fmt: skip
    w, b, *_ = reference_fit(
        [(X, y)], alpha=0.01, l1_ratio=l1_ratio, batch=4, epochs=3, average=int(average),
        period=period, k=X.shape[1], overlap=overlap,
    )  # fmt: skip
    check_close(model, w, b)
    assert model.comm_stats_[0]["exchanges"] == math.ceil(math.ceil(300 / 4) / period)


@pytest.mark.parametrize("batch", [1, 16])
def test_optimal_schedule_starts_as_scikit_learns(data, batch):
    # large early steps amplify rounding differences: agreement to 1e-5, not 1e-12
    X, y = data
    model = SparseSGDClassifier(
        loss="log_loss", alpha=0.01, batch_size=batch, max_iter=2, tol=None, shuffle=False
    ).fit(X, y)
    w, b, *_ = reference_fit(
        [(X, y)], alpha=0.01, batch=batch, epochs=2, learning_rate="optimal", average="auto"
    )
    check_close(model, w, b, rtol=1e-5, atol=1e-7)


def test_regressor_invscaling_follows_the_arithmetic(data):
    X, _ = data
    target = X @ np.linspace(-1, 1, X.shape[1]) + 0.5
    model = SparseSGDRegressor(
        batch_size=5, max_iter=2, tol=None, shuffle=False, eta0=0.01, power_t=0.25
    ).fit(X, target)
    w, b, *_ = reference_fit(
        [(X, target)], alpha=1e-4, batch=5, epochs=2, loss="squared_error",
        learning_rate="invscaling", power_t=0.25,
    )  # fmt: skip
    check_close(model, w, b)


@pytest.mark.parametrize(
    ("error_feedback", "overlap"), [(True, False), (False, False), (True, True)]
)
def test_topk_diagnostics_follow_a_numpy_replay(error_feedback, overlap):
    X, y = sparse_problem()
    k, batch, epochs, period = 8, 8, 2, 3
    model = SparseSGDClassifier(
        loss="log_loss", alpha=0.01, batch_size=batch, max_iter=epochs, tol=None,
        shuffle=False, compression="topk", topk=k, error_feedback=error_feedback,
        overlap=overlap, diagnostics=True, learning_rate="constant", eta0=0.05,
        local_steps=period, average=False,
    ).fit(X, y)  # fmt: skip
    w, b, gammas, xis = reference_fit(
        [(X, y)], alpha=0.01, eta0=0.05, batch=batch, epochs=epochs, k=k * period, period=period,
        error_feedback=error_feedback, overlap=overlap,
    )  # fmt: skip
    check_close(model, w, b, rtol=1e-9)
    for record, gamma, xi in zip(model.comm_stats_, gammas, xis, strict=True):
        assert len(record["gamma"]) == len(record["xi"]) == record["exchanges"] == len(gamma)
        np.testing.assert_allclose(record["gamma"], gamma, rtol=1e-9, atol=0)
        # one rank: the sum of the TopKs is the TopK of the sum
        np.testing.assert_allclose(record["xi"], xi, rtol=0, atol=1e-15)
    every_gamma = np.concatenate(gammas)
    assert 0.3 < every_gamma.min() and every_gamma.max() < 1  # TopK really drops entries


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(average=True, batch_size=1),
        dict(penalty="elasticnet", l1_ratio=0.005),
        # one rank on the path of several: the agreed model and the changes in flight
        dict(compression="topk", topk=1.0, local_steps=5),
        dict(compression="topk", topk=1.0, local_steps=5, overlap=True, average=True),
        dict(compression="topk", topk=3, local_steps=5, overlap=True),
    ],
)
def test_a_shrink_to_zero_follows_the_arithmetic(data, options):
    # eta0 * alpha = 1.5: every step's L2 shrink, max(0, 1 - eta * l2), is zero, so each
    # step starts from zero weights (scikit-learn's clamp), where wscale would reach 0
    X, y = data
    options = {"batch_size": 4, "average": False, **options}
    model = SparseSGDClassifier(
        loss="log_loss", alpha=30.0, max_iter=3, tol=None, shuffle=False,
        learning_rate="constant", eta0=0.05, **options,
    ).fit(X, y)  # fmt: skip
    period = options.get("local_steps", 1)
    topk = options.get("topk")
    w, b, *_ = reference_fit(
        [(X, y)], alpha=30.0, l1_ratio=options.get("l1_ratio", 0.0),
        batch=options["batch_size"], epochs=3, average=int(options["average"]), eta0=0.05,
        period=period, k=None if topk is None else X.shape[1] if topk == 1.0 else topk * period,
        overlap=options.get("overlap", False),
    )  # fmt: skip
    check_close(model, w, b)
    assert np.abs(w).max() > 1e-3  # the last step's change: not a model of zeros


def test_a_first_step_that_shrinks_to_zero_follows_the_optimal_schedule(data):
    # alpha >= 1 with learning_rate="optimal": the first step's rate times alpha is
    # alpha ** 0.75 >= 1, the shrink of that step zero; the later steps shrink less
    X, y = data
    options = dict(alpha=2.0, batch_size=4, max_iter=2, tol=None, shuffle=False, average=False)
    model = SparseSGDClassifier(loss="log_loss", **options).fit(X, y)
    w, b, *_ = reference_fit([(X, y)], alpha=2.0, batch=4, epochs=2, learning_rate="optimal")
    check_close(model, w, b)
