"""The regressor: squared error, Huber and epsilon-insensitive losses, by SGD over sparse
allreduce."""

import numpy as np
from sklearn.base import RegressorMixin, _fit_context

from . import options
from ._base import SparseSGD


class SparseSGDRegressor(RegressorMixin, SparseSGD):
    __doc__ = options.docstring(
        options.REGRESSOR,
        """Linear regression (squared error, Huber, epsilon-insensitive) by SGD over sparse
allreduce.

The parameters shared with :class:`sklearn.linear_model.SGDRegressor` mean what they mean
there and take the same values, but for the differences listed, each with its reason, in
docs/sklearn-differences.md. It trains as :class:`SparseSGDClassifier` does.""",
        """Attributes
----------
coef_ : ndarray of shape (n_features,)
    The weights.
intercept_ : ndarray of shape (1,)
    The intercept.
n_iter_, t_, n_features_in_, comm_stats_, resumed_from_
    As :class:`SparseSGDClassifier`'s.

Examples
--------
>>> from sklearn.datasets import make_regression
>>> from sparcml_apps import SparseSGDRegressor
>>> X, y = make_regression(2000, 20, noise=1.0, random_state=0)
>>> model = SparseSGDRegressor(random_state=0).fit(X, y)
>>> model.score(X, y) > 0.99
True""",
    )

    _passive_aggressive_loss = "epsilon_insensitive"
    _parameter_constraints = options.constraints(options.REGRESSOR)
    __init__ = options.init(options.REGRESSOR)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, coef_init=None, intercept_init=None, sample_weight=None):
        """Fit the model for up to ``max_iter`` epochs (all ranks of ``comm`` together)."""
        return self._fit_dispatch(
            X,
            y,
            method="fit",
            coef_init=coef_init,
            intercept_init=intercept_init,
            sample_weight=sample_weight,
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None):
        """One epoch over ``(X, y)``."""
        return self._fit_dispatch(X, y, method="partial_fit", sample_weight=sample_weight)

    def _encode_targets(self, comm, y, labels_per_rank, partial, fresh, classes):
        one = np.ones(1)
        return np.asarray(y, np.float64), 1, False, one, one

    def predict(self, X):
        """The predicted value of each row."""
        return self._raw_scores(X).ravel()
