"""Every loss, learning rate and penalty at default options, on standardized and unscaled
data: the scores of scikit-learn's estimators and of sparcml's (in one process or on the
ranks of ``comm``). The classifier's losses here are its own; it also takes the regressor's,
compared with scikit-learn's in tests/test_estimators_parity.py."""

import itertools
import warnings

import numpy as np
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.preprocessing import StandardScaler

from sparcml_apps import SparseSGDClassifier, SparseSGDRegressor

CLASSIFIER_LOSSES = ["hinge", "log_loss", "modified_huber", "squared_hinge", "perceptron"]
REGRESSOR_LOSSES = ["squared_error", "huber", "epsilon_insensitive", "squared_epsilon_insensitive"]
LEARNING_RATES = ["optimal", "invscaling", "constant", "adaptive"]
PENALTIES = ["l2", "l1", "elasticnet", None]
SCALES = ["standardized", "unscaled"]
ROWS = 300
SEEDS = [0, 1, 2]
"""Seeds of the fits in one process: at the edge of stability one may diverge, for
scikit-learn as for sparcml, so a case scores the median over them."""
CONVERGED = {"classifier": 0.7, "regressor": 0.8}
"""A score (accuracy, R2) at which a fit has converged."""


def data(kind, scale):
    """Training rows and targets: features of unit scale, or of scales from 0.1 to 30 with
    offsets (as raw measurements come)."""
    if kind == "classifier":
        X, y = make_classification(ROWS, 12, n_informative=6, random_state=0)
    else:
        X, y = make_regression(ROWS, 12, n_informative=8, noise=1.0, random_state=0)
    if scale == "standardized":
        return StandardScaler().fit_transform(X), y
    rng = np.random.default_rng(1)
    return X * 10 ** rng.uniform(-1, 1.5, X.shape[1]) + rng.uniform(-5, 5, X.shape[1]), y


def cases(full=False):
    """Every loss with every learning rate and scaling; with ``full`` every penalty too,
    else one penalty each, in turn, so that every penalty meets every loss, every rate
    and every scaling."""
    for kind, losses in (("classifier", CLASSIFIER_LOSSES), ("regressor", REGRESSOR_LOSSES)):
        for (i, loss), (j, rate), (k, scale) in itertools.product(
            enumerate(losses), enumerate(LEARNING_RATES), enumerate(SCALES)
        ):
            penalties = PENALTIES if full else [PENALTIES[(i + j + k) % len(PENALTIES)]]
            for penalty in penalties:
                yield kind, loss, rate, penalty, scale


def name(case):
    return "-".join(map(str, case))


def score(estimator, X, y, rows=slice(None)):
    """The estimator's score on all rows after a fit on ``rows`` (NaN when the fit raises
    an overflow, as scikit-learn's and sparcml's do, or leaves a model that is not
    finite), and whether it stopped before ``max_iter``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            estimator.fit(X[rows], y[rows])
        except ValueError as error:
            if "overflow" not in str(error):
                raise
            return float("nan"), False
    stopped = estimator.n_iter_ < estimator.max_iter
    if not np.all(np.isfinite(estimator.coef_)):
        return float("nan"), stopped
    return float(estimator.score(X, y)), stopped


def scores(ours, comm=None, rows=slice(None), seeds=SEEDS, full=False):
    """``{case name: (median score over seeds, whether most fits stopped before
    max_iter)}`` over the :func:`cases`: scikit-learn's, or with ``ours`` sparcml's on
    ``comm`` with this rank's ``rows`` (a slice)."""
    out = {}
    for case in cases(full):
        kind, loss, rate, penalty, scale = case
        X, y = data(kind, scale)
        options = {"loss": loss, "learning_rate": rate, "penalty": penalty}
        if ours:
            cls = SparseSGDClassifier if kind == "classifier" else SparseSGDRegressor
            options["comm"] = comm
        else:
            cls = SGDClassifier if kind == "classifier" else SGDRegressor
        fits = [score(cls(random_state=seed, **options), X, y, rows) for seed in seeds]
        out[name(case)] = (
            float(np.median([s for s, _ in fits])),
            2 * sum(stopped for _, stopped in fits) > len(fits),
        )
    return out
