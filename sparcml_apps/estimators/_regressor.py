"""The regressor: squared error, Huber and epsilon-insensitive losses, by SGD over sparse
allreduce."""

import numpy as np
from sklearn.base import RegressorMixin, _fit_context

from . import options
from ._base import SparseSGD


class SparseSGDRegressor(RegressorMixin, SparseSGD):
    __doc__ = options.docstring(
        options.REGRESSOR,
        """Linear regressors (least squares, Huber, ...) by SGD over sparse allreduce.

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

See Also
--------
SparseSGDClassifier : The classifier, which documents how both train.
sklearn.linear_model.SGDRegressor : scikit-learn's, in one process.

Examples
--------
>>> from sklearn.datasets import make_regression
>>> from sparcml_apps import SparseSGDRegressor
>>> X, y = make_regression(2000, 20, noise=1.0, random_state=0)
>>> model = SparseSGDRegressor(random_state=0).fit(X, y)
>>> model.score(X, y) > 0.99
True
>>> model.coef_.shape, model.intercept_.shape
((20,), (1,))""",
    )

    _passive_aggressive_loss = "epsilon_insensitive"
    _parameter_constraints = options.constraints(options.REGRESSOR)
    __init__ = options.init(options.REGRESSOR)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, coef_init=None, intercept_init=None, sample_weight=None):
        """Fit the model for up to ``max_iter`` epochs (all ranks of ``comm`` together).

        It starts from ``coef_init`` and ``intercept_init``, else (with ``warm_start``)
        from the last fit, else from zeros; ``early_stopping`` and ``tol`` decide when it
        stops. With ``comm``, every rank of it calls ``fit`` with its own rows, and every
        rank ends with the same model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows (this rank's, with ``comm``): dense, scipy sparse or pydata
            ``sparse``, float64 or float32 (other dtypes become float64); a Dask array
            fits on the workers of a Dask cluster.
        y : array-like of shape (n_samples,)
            The target value of each row.
        coef_init : ndarray of shape (n_features,), default=None
            The weights to start from.
        intercept_init : ndarray of shape (1,), default=None
            The intercept to start from.
        sample_weight : array-like of shape (n_samples,), default=None
            The weight of each row (None: all 1).

        Returns
        -------
        self : object
            This estimator, fitted.

        Raises
        ------
        ValueError
            When a parameter is out of its range (scikit-learn's ``InvalidParameterError``,
            a ValueError) or the parameters do not go together; when ``X``, ``y``,
            ``sample_weight``, ``coef_init`` or ``intercept_init`` do not fit (their
            shapes, NaN or infinite values); with ``comm``, when the ranks' data or
            parameters differ where they must agree.
        collectives.RankError
            With ``comm`` or ``n_jobs``: another rank, or a worker, failed; its rank and
            its error are in the message.

        Warns
        -----
        sklearn.exceptions.ConvergenceWarning
            When ``max_iter`` epochs ran without meeting ``tol``.
        RuntimeWarning
            When the steps diverged (the slope of the loss was clipped).

        See Also
        --------
        partial_fit : One epoch, continuing from the last call.

        Examples
        --------
        >>> from sklearn.datasets import make_regression
        >>> from sparcml_apps import SparseSGDRegressor
        >>> X, y = make_regression(500, 20, noise=1.0, random_state=0)
        >>> model = SparseSGDRegressor(random_state=0).fit(X, y)
        >>> round(model.score(X, y), 2)
        1.0
        >>> SparseSGDRegressor(alpha=-1.0).fit(X, y)
        Traceback (most recent call last):
        ...
        sklearn...InvalidParameterError: The 'alpha' parameter of SparseSGDRegressor must be a ...
        """
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
        """One epoch over ``(X, y)``.

        The first call starts from zeros, each later one from where the last one ended
        (``coef_`` and the training state, such as the averages and the steps taken). It
        never stops early: ``early_stopping`` must be False or "auto", and ``checkpoint``
        None.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows (this rank's, with ``comm``), as :meth:`fit` takes them.
        y : array-like of shape (n_samples,)
            The target value of each row.
        sample_weight : array-like of shape (n_samples,), default=None
            The weight of each row (None: all 1).

        Returns
        -------
        self : object
            This estimator, fitted one epoch further.

        Raises
        ------
        ValueError
            As :meth:`fit`; also when ``X`` has another number of columns than the first
            call's, with ``early_stopping=True`` or with a ``checkpoint``.
        collectives.RankError
            With ``comm`` or ``n_jobs``: another rank, or a worker, failed.

        Examples
        --------
        >>> from sklearn.datasets import make_regression
        >>> from sparcml_apps import SparseSGDRegressor
        >>> X, y = make_regression(500, 20, noise=1.0, random_state=0)
        >>> model = SparseSGDRegressor(random_state=0)
        >>> for rows in (slice(0, 250), slice(250, 500)):
        ...     model = model.partial_fit(X[rows], y[rows])
        >>> int(model.t_), model.coef_.shape
        (501, (20,))
        """
        return self._fit_dispatch(X, y, method="partial_fit", sample_weight=sample_weight)

    def _encode_targets(self, comm, y, labels_per_rank, partial, fresh, classes):
        one = np.ones(1)
        return np.asarray(y, np.float64), 1, False, one, one

    def predict(self, X):
        """The predicted value of each row.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows, of the width of the rows fitted.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``X @ coef_ + intercept_``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before the first fit.
        ValueError
            When ``X`` has another number of columns than the rows fitted, or NaN or
            infinite values.

        Examples
        --------
        >>> import numpy as np
        >>> from sparcml_apps import SparseSGDRegressor
        >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
        >>> y = X @ [2.0, 1.0]
        >>> model = SparseSGDRegressor(
        ...     learning_rate="constant", eta0=0.1, tol=None, max_iter=50, random_state=0
        ... )
        >>> model.fit(X, y).predict([[1.0, 1.0], [2.0, 0.0]]).round(1)
        array([3., 4.])
        """
        return self._raw_scores(X).ravel()
