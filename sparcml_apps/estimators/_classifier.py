"""The classifier: linear SVM, logistic regression and others, by SGD over sparse allreduce."""

import numpy as np
from scipy.special import expit
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import unique_labels

import collectives

from . import options
from ._base import SparseSGD


class SparseSGDClassifier(ClassifierMixin, SparseSGD):
    __doc__ = options.docstring(
        options.CLASSIFIER,
        """Linear classifiers (SVM, logistic regression, ...) by SGD over sparse allreduce.

The parameters shared with :class:`sklearn.linear_model.SGDClassifier` mean what they mean
there and take the same values, but for the differences listed, each with its reason, in
docs/sklearn-differences.md. Every rank takes SGD steps on its own rows; every
``local_steps`` steps the ranks average their changes to the model
(:mod:`sparcml_apps.training.exchange`). Where ``fit`` runs follows from what it is given: in
this process; on the ranks of ``comm``; on ``n_jobs`` worker processes; on the workers of
a Dask cluster when ``X`` is a Dask array.""",
        """Attributes
----------
coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    The weights (the average of the steps' weights, once averaging began).
intercept_ : ndarray of shape (1,) or (n_classes,)
    The intercepts.
classes_ : ndarray of shape (n_classes,)
    The class labels.
n_iter_ : int
    The epochs the last fit ran.
t_ : float
    The steps taken so far, plus one (each rank's own count).
n_features_in_ : int
    The number of columns seen in ``fit``.
comm_stats_ : list of dict
    Per epoch: the loss, seconds, steps, exchanges, local steps between them, this
    rank's allreduce traffic (bytes, messages, seconds) beside what a dense allreduce of
    the same exchanges would have sent, the held-out score; with ``diagnostics``,
    ``gamma`` and ``xi``, one value an exchange (else None).
resumed_from_ : str or None
    The checkpoint folder the last fit resumed from.

See Also
--------
SparseSGDRegressor : The regressor, trained alike.
sklearn.linear_model.SGDClassifier : scikit-learn's, in one process.
sparcml_apps.jobs.pool : The worker processes of ``n_jobs``.
sparcml_apps.cluster.initialize : Dask on MPI, for fits on Dask arrays.

Examples
--------
>>> from sklearn.datasets import make_classification
>>> from sparcml_apps import SparseSGDClassifier
>>> X, y = make_classification(2000, 20, random_state=0)
>>> model = SparseSGDClassifier(loss="log_loss", random_state=0).fit(X, y)
>>> model.score(X, y) > 0.9
True
>>> model.predict_proba(X[:2]).shape
(2, 2)

Sparse rows, such as those of LIBSVM's ``url`` (here a small synthetic copy), are taken as
they are:

>>> from sparcml_apps.datasets import make_url_like
>>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
>>> model = SparseSGDClassifier(random_state=0).fit(X[:2000], y[:2000])
>>> round(model.score(X[2000:], y[2000:]), 2)
0.74
>>> model.coef_.shape, model.classes_
((1, 10000), array([-1.,  1.]))""",
    )

    _passive_aggressive_loss = "hinge"  # the loss learning_rate="pa1" and "pa2" go with
    _parameter_constraints = options.constraints(options.CLASSIFIER)
    __init__ = options.init(options.CLASSIFIER)

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
            The class of each row.
        coef_init : ndarray of shape (1, n_features) or (n_classes, n_features), default=None
            The weights to start from.
        intercept_init : ndarray of shape (1,) or (n_classes,), default=None
            The intercepts to start from.
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
            shapes, NaN or infinite values, a single class); with ``comm``, when the ranks'
            data or parameters differ where they must agree.
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
        >>> from sparcml_apps import SparseSGDClassifier
        >>> from sparcml_apps.datasets import make_url_like
        >>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
        >>> model = SparseSGDClassifier(random_state=0).fit(X[:2000], y[:2000])
        >>> round(model.score(X[2000:], y[2000:]), 2)
        0.74

        Without ``classes`` in ``y``, it raises:

        >>> SparseSGDClassifier().fit(X[:2], [1, 1])
        Traceback (most recent call last):
        ...
        ValueError: The number of classes has to be greater than one; got 1 class: [1].
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
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch over ``(X, y)``; ``classes`` is required on the first call.

        The first call starts from zeros, each later one from where the last one ended
        (``coef_`` and the training state, such as the averages and the steps taken). It
        never stops early: ``early_stopping`` must be False or "auto", and ``checkpoint``
        None.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows (this rank's, with ``comm``), as :meth:`fit` takes them.
        y : array-like of shape (n_samples,)
            The class of each row, one of ``classes``.
        classes : array-like of shape (n_classes,), default=None
            Every class of all calls: required on the first call; a later call may pass
            the same ones again.
        sample_weight : array-like of shape (n_samples,), default=None
            The weight of each row (None: all 1).

        Returns
        -------
        self : object
            This estimator, fitted one epoch further.

        Raises
        ------
        ValueError
            As :meth:`fit`; also when the first call has no ``classes``, a later one
            other ``classes``, ``y`` a label not among them, ``X`` another number of
            columns than the first call's; with ``early_stopping=True``, a
            ``checkpoint`` or ``class_weight="balanced"``.
        collectives.RankError
            With ``comm`` or ``n_jobs``: another rank, or a worker, failed.

        Examples
        --------
        >>> from sparcml_apps import SparseSGDClassifier
        >>> from sparcml_apps.datasets import make_url_like
        >>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
        >>> model = SparseSGDClassifier(loss="log_loss", random_state=0)
        >>> for rows in (slice(0, 1000), slice(1000, 2000)):
        ...     model = model.partial_fit(X[rows], y[rows], classes=[-1, 1])
        >>> int(model.t_), round(model.score(X[2000:], y[2000:]), 2)
        (2001, 0.71)
        >>> SparseSGDClassifier().partial_fit(X[:10], y[:10])
        Traceback (most recent call last):
        ...
        ValueError: classes must be passed on the first call to partial_fit.
        """
        return self._fit_dispatch(
            X, y, method="partial_fit", classes=classes, sample_weight=sample_weight
        )

    def _encode_targets(self, comm, y, labels_per_rank, partial, fresh, classes):
        """Targets as the kernels want them (+-1, or the class index), class weights.

        ``classes_`` are those of ``y`` for ``fit``; ``partial_fit`` takes them from
        ``classes`` on its first call, and any later ``classes`` must be the same.
        """
        present = unique_labels(*labels_per_rank)
        if partial:
            if self.class_weight == "balanced":
                raise ValueError(
                    "class_weight 'balanced' is not supported for partial_fit: it would "
                    "weigh each call's rows alone. Pass the weights of the whole training "
                    "set instead: class_weight=dict(zip(classes, compute_class_weight("
                    "'balanced', classes=classes, y=y))) (sklearn.utils.class_weight)."
                )
            if classes is None and fresh:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            if classes is not None:
                classes = unique_labels(classes)
                if not fresh and not np.array_equal(classes, self.classes_):
                    raise ValueError(
                        f"`classes={classes.tolist()}` is not the same as on last call to "
                        f"partial_fit, was: {self.classes_.tolist()}"
                    )
                self.classes_ = classes
        else:
            self.classes_ = present
        unknown = np.setdiff1d(present, self.classes_)
        if unknown.size:
            raise ValueError(
                f"`classes={self.classes_.tolist()}` were given, but y contains other "
                f"labels: {unknown.tolist()}."
            )
        n_classes = self.classes_.size
        if n_classes < 2:
            raise ValueError(
                "The number of classes has to be greater than one; got "
                f"{n_classes} class: {self.classes_.tolist()}."
            )
        index = np.searchsorted(self.classes_, y)
        class_weight = self._class_weights(comm, index, n_classes)
        if n_classes == 2:
            targets = np.where(index == 1, 1.0, -1.0)
            return targets, 1, False, class_weight[1:], class_weight[:1]
        return index.astype(np.float64), n_classes, True, class_weight, np.ones(n_classes)

    def _class_weights(self, comm, index, n_classes):
        if self.class_weight is None:
            return np.ones(n_classes)
        if self.class_weight == "balanced":
            counts = np.bincount(index, minlength=n_classes).astype(np.float64)
            counts = collectives.allreduce(counts, comm, algorithm="dense")
            return counts.sum() / (n_classes * np.maximum(counts, 1))
        weights = np.ones(n_classes)
        for label, weight in self.class_weight.items():
            where = np.flatnonzero(self.classes_ == label)
            if where.size == 0:
                raise ValueError(
                    f"The 'class_weight' parameter names the class {label!r}, which is not "
                    f"among the classes {self.classes_.tolist()}."
                )
            weights[where[0]] = weight
        return weights

    def decision_function(self, X):
        """Confidence scores: shape (n_samples,) for two classes, else one column a class.

        A row's score for a class is its distance, in the model's units, from the
        hyperplane of that class: ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to score, of the width of the rows fitted.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            With two classes, each row's score for ``classes_[1]`` (positive: that
            class); with more, each row's score for every class.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before the first fit.
        ValueError
            When ``X`` has another number of columns than the rows fitted, or NaN or
            infinite values.

        Examples
        --------
        >>> from sparcml_apps import SparseSGDClassifier
        >>> from sparcml_apps.datasets import make_url_like
        >>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
        >>> model = SparseSGDClassifier(random_state=0).fit(X[:2000], y[:2000])
        >>> model.decision_function(X[2000:2003]).round(2)
        array([-0.34,  3.73, -5.84])
        """
        scores = self._raw_scores(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """The class of each row.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows, of the width of the rows fitted.

        Returns
        -------
        ndarray of shape (n_samples,)
            The class of each row, among ``classes_``: the one of the highest
            :meth:`decision_function` (with two classes, ``classes_[1]`` where it is
            positive).

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
        >>> from sparcml_apps import SparseSGDClassifier
        >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, 2.0], [2.0, 3.0]])
        >>> y = np.array(["a", "a", "b", "b", "c", "c"])
        >>> model = SparseSGDClassifier(random_state=0).fit(X, y)
        >>> model.predict(X)
        array(['a', 'a', 'b', 'c', 'c', 'c'], dtype='<U1')
        >>> model.predict(X[:, :1])
        Traceback (most recent call last):
        ...
        ValueError: X has 1 features, but SparseSGDClassifier is expecting 2 features as input.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[scores.argmax(axis=1)]

    def _has_proba(self):
        if self.loss not in ("log_loss", "modified_huber"):
            raise AttributeError(
                f"probability estimates are not available for loss={self.loss!r}; "
                "use loss='log_loss' or 'modified_huber'"
            )
        return True

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Probability of each class (log_loss: logistic; modified_huber: clipped).

        With ``loss="log_loss"``, the logistic function of :meth:`decision_function`;
        with ``loss="modified_huber"``, ``(clip(score, -1, 1) + 1) / 2``. With more than
        two classes, each class's (one against the rest), normalized to sum to 1 (evenly
        shared where all are 0). Other losses have no probabilities: the method is then
        absent (``hasattr`` is False).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows, of the width of the rows fitted.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probability of each class, in the order of ``classes_``.

        Raises
        ------
        AttributeError
            When ``loss`` is neither "log_loss" nor "modified_huber".
        sklearn.exceptions.NotFittedError
            Before the first fit.
        ValueError
            When ``X`` has another number of columns than the rows fitted, or NaN or
            infinite values.

        See Also
        --------
        predict_log_proba : Their logarithms.

        Examples
        --------
        >>> from sparcml_apps import SparseSGDClassifier
        >>> from sparcml_apps.datasets import make_url_like
        >>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
        >>> model = SparseSGDClassifier(loss="log_loss", random_state=0).fit(X[:2000], y[:2000])
        >>> model.predict_proba(X[2000:2002]).round(2)
        array([[0.73, 0.27],
               [0.  , 1.  ]])
        >>> hasattr(SparseSGDClassifier(loss="hinge"), "predict_proba")
        False
        """
        scores = self.decision_function(X)
        binary = scores.ndim == 1
        if self.loss == "log_loss":
            prob = expit(scores)
            if binary:
                return np.column_stack([1 - prob, prob])
            return prob / prob.sum(axis=1, keepdims=True)
        prob = (np.clip(scores, -1, 1) + 1) / 2
        if binary:
            return np.column_stack([1 - prob, prob])
        total = prob.sum(axis=1, keepdims=True)
        none = total[:, 0] == 0
        prob[none] = 1.0 / self.classes_.size
        total[none] = 1.0
        return prob / total

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows, of the width of the rows fitted.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The natural logarithm of the probability of each class, in the order of
            ``classes_`` (-inf where it is 0).

        Raises
        ------
        AttributeError
            When ``loss`` is neither "log_loss" nor "modified_huber".
        sklearn.exceptions.NotFittedError
            Before the first fit.
        ValueError
            When ``X`` has another number of columns than the rows fitted, or NaN or
            infinite values.

        Examples
        --------
        >>> import numpy as np
        >>> from sparcml_apps import SparseSGDClassifier
        >>> from sparcml_apps.datasets import make_url_like
        >>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
        >>> model = SparseSGDClassifier(loss="log_loss", random_state=0).fit(X[:2000], y[:2000])
        >>> np.allclose(np.exp(model.predict_log_proba(X[:5])), model.predict_proba(X[:5]))
        True
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
