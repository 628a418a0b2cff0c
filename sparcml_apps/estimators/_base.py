"""What both estimators share: parameters, validation and the driver of a fit, which hands
the fit to a backend (:mod:`sparcml_apps.backends`) and takes what it fitted."""

import functools
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import check_is_fitted

import collectives

from .. import training
from ..backends import communicator, in_process, pool
from ..training import holdout, kernels
from . import options
from ._task import FitTask
from ._validation import (
    RANK_OWN,
    check_agreement,
    check_parameters,
    ranges,
    same,
    validate_fit_data,
    validate_predict_data,
)

SPARSE_INTERCEPT_DECAY = 0.01
"""How much of a step the intercept takes when ``X`` is sparse (1 when it is dense), as in
scikit-learn: the intercept sees every row, each weight only the rows that hold its column."""
EARLY_STOPPING_ROWS = 10_000
"""With ``early_stopping="auto"``, a fit of this many rows or more (all ranks together)
holds ``validation_fraction`` of them out, at most this many, and stops on their score:
the loss of the steps depends on the number of ranks (each rank's steps see its own rows
only), the score of the model does not. Ten thousand rows tell a change of ``tol=1e-3``
in accuracy from ten rows, and leave more rows to train on than a tenth of a large set."""
SIGNIFICANCE = 2.0
"""With ``early_stopping="auto"``, a rise of the held-out score over the last epoch whose
rise counted counts only when it passes ``tol`` and this many standard errors of the
difference of two scores of the held-out rows by unrelated models: a rise within the
noise of the held-out rows does not keep a fit going, small rises add up until they
count, and the bar is the same however much the models jitter from epoch to epoch (one
rank's more than the mean of several ranks'), so P ranks stop where one rank does."""


class SparseSGD(BaseEstimator):
    """Parameters, validation and the training driver shared by both estimators."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # -- fitting ----------------------------------------------------------------------

    def _fit_dispatch(self, X, y, *, method, sample_weight=None, **arguments):
        """Fit here, on the ranks of ``comm``, on ``n_jobs`` worker processes, or on the
        workers of a Dask cluster when ``X`` is a Dask array: the backend
        (:mod:`sparcml_apps.backends`) fits a :class:`FitTask` of this call, and this
        estimator takes what it fitted."""
        check_parameters(self)
        if method == "partial_fit" and self.early_stopping not in (False, "auto"):
            raise ValueError("early_stopping should be False with partial_fit")
        if method == "partial_fit" and self.checkpoint is not None:
            raise ValueError(
                "checkpoint should be None with partial_fit: its caller holds the training "
                "state between calls (checkpoints are for fit)"
            )
        if hasattr(X, "__dask_graph__"):
            from ..backends import dask_cluster as backend
        elif pool.workers(self.n_jobs) > 1:
            backend = pool
        elif self.comm is not None:
            backend = communicator
        else:
            backend = in_process
        task = FitTask(self, method, arguments)
        fitted = backend.fit(task, X, y, sample_weight=sample_weight)
        return self._adopt(fitted)

    def _plan(
        self,
        comm,
        X,
        y,
        *,
        partial,
        classes=None,
        coef_init=None,
        intercept_init=None,
        sample_weight=None,
        ranks=None,
    ):
        """Check this rank's rows and the arguments, agree with the other ranks of
        ``comm`` and set this estimator up (its classes, its width): the
        :class:`~sparcml_apps.training.Plan` of this rank, which raises on every rank what
        does not fit. ``ranks`` (default: those of ``comm``) is the number of ranks that
        will train: the rows of all of them can be planned here, on one rank, and split;
        then the copy of this estimator that a ``callback`` is shown on a rank takes that
        rank's communicator as its ``comm``."""
        fresh = self._fresh(partial)
        previous_classes = getattr(self, "classes_", None)
        error = checked = None
        try:
            checked = validate_fit_data(
                self, X, y, sample_weight, reset=fresh, allow_empty=comm.Get_size() > 1
            )
        except Exception as exc:  # noqa: BLE001 - every rank raises it, below
            error = exc
        collectives.check(error, comm)
        elsewhere, ranks = ranks is not None, comm.Get_size() if ranks is None else ranks
        setup, X, y_encoded, row_weight, weights, held = self._prepare(
            comm, checked, partial, fresh, previous_classes, classes, coef_init,
            intercept_init, ranks,
        )  # fmt: skip
        report = saving = None
        if self.callback is not None:
            report = functools.partial(self._report_to_callback, dtype=X.dtype, elsewhere=elsewhere)
            setup.progress = getattr(self.callback, "steps", None)
        if self.checkpoint is not None:
            options = self._resume_options(setup, ranks)
            saving = (self.checkpoint, self.checkpoint_seconds, options, self.resume)
        return training.Plan(
            setup,
            weights,
            X,
            y_encoded,
            row_weight,
            held,
            max_epochs=1 if partial else self.max_iter,
            check_convergence=not partial,
            significance=SIGNIFICANCE if isinstance(self.early_stopping, str) else 0.0,
            checkpoint=saving,
            report=report,
        )

    def _finish(self, trained, *, partial):
        """Keep what :func:`sparcml_apps.training.run` returned: the training state and
        the fitted attributes; warn as scikit-learn does (every rank alike)."""
        self._weights = trained.weights
        self._set_model(trained.coef, trained.intercept, trained.coef.dtype)
        self.n_iter_ = len(trained.history)
        self.t_ = trained.weights.t
        self.comm_stats_ = [record.as_dict() for record in trained.history]
        self.resumed_from_ = trained.resumed_from
        diverged = [record.epoch for record in trained.history if record.clipped]
        if diverged:
            warnings.warn(
                f"The steps diverged in epoch(s) {ranges(diverged)}: the slope of the loss "
                f"exceeded {kernels.MAX_DLOSS:g} and was clipped. Scaling the input data "
                "(StandardScaler or MaxAbsScaler) or a smaller learning rate might help.",
                RuntimeWarning,
                stacklevel=5,  # fit, through the backend and the task
            )
        if not partial and self.tol is not None and self.n_iter_ == self.max_iter:
            warnings.warn(
                "Maximum number of iteration reached before convergence. Consider "
                "increasing max_iter to improve the fit.",
                ConvergenceWarning,
                stacklevel=5,
            )
        if not partial and self.power_t < 0:
            warnings.warn(
                "Negative values for `power_t` are deprecated, as in scikit-learn (which "
                "will refuse them): the rate eta0 / t ** power_t then grows without bound. "
                f"Use power_t >= 0. Got power_t={self.power_t!r}.",
                FutureWarning,
                stacklevel=5,
            )

    def _prepare(
        self, comm, checked, partial, fresh, previous_classes, classes, coef_init,
        intercept_init, ranks,
    ):  # fmt: skip
        """What a fit does with the checked data (:func:`~._validation.validate_fit_data`) before it
        trains, raising on every rank what does not fit: the setup, this rank's rows, their
        encoded targets and weights, the initial weights and the rows held out (or None)."""
        X, y, sample_weight, sparse_input, labels = checked
        setup, X, y_encoded, row_weight, stops_early = self._agree_on_data(
            comm, X, y, labels, sample_weight, sparse_input, partial, fresh, classes, ranks
        )
        error = weights = None
        try:
            weights = self._initial_weights(
                setup, partial, coef_init, intercept_init, previous_classes
            )
        except Exception as exc:  # noqa: BLE001 - every rank raises it, below
            error = exc
        collectives.check(error, comm)
        held = None
        if stops_early:
            held = self._hold_out(comm, y_encoded, row_weight, setup)
        return setup, X, y_encoded, row_weight, weights, held

    def _resume_options(self, setup, ranks):
        """What a run must share with a checkpoint to resume from it: the options of the
        training (but how many epochs it may take), the classes and the number of ranks."""
        skipped = ("callback", "progress", "verbose")
        options = {k: v for k, v in setup.__dict__.items() if k not in skipped}
        options.update(
            value_dtype=np.dtype(setup.value_dtype).name,
            early_stopping=self.early_stopping,
            validation_fraction=self.validation_fraction,
            classes=getattr(self, "classes_", None),
            ranks=ranks,
        )
        return options

    def _fresh(self, partial):
        """Whether this fit starts afresh (and so learns the width of ``X``)."""
        return not partial or not hasattr(self, "coef_")

    def _agree_on_data(
        self, comm, X, y, labels, sample_weight, sparse_input, partial, fresh, classes, ranks
    ):
        """Check that the ranks' data and parameters fit together; the setup, this rank's
        rows (in the dtype of the others when it holds none), their encoded targets and
        weights, and whether the fit holds rows out to stop early (:meth:`_stops_early`).

        Whatever this raises, it raises on every rank: it decides on gathered values.
        """
        name = type(self).__name__
        mine = dict(
            width=X.shape[1],
            labels=labels,
            rows=X.shape[0],
            sparse=sparse_input,
            weight=float(sample_weight.sum()),
            dtype=X.dtype.name,
            params={k: v for k, v in self.get_params(deep=False).items() if k not in RANK_OWN},
            classes=None if classes is None else np.asarray(classes),
        )
        gathered = comm.allgather(mine)
        width, holding, n_rows = check_agreement(name, gathered)
        stops_early = self._stops_early(n_rows, partial)
        # rows held out have their weights checked first (:meth:`_hold_out`)
        if sum(rank["weight"] for rank in gathered) == 0 and not stops_early:
            raise ValueError("Sample weights must contain at least one non-zero number.")
        X = X.astype(holding[0]["dtype"], copy=False)  # a rank without rows takes the others'
        # the ranks that hold rows decide whether the input is sparse (intercept decay)
        sparse_input = any(rank["sparse"] for rank in holding)
        seed = comm.bcast(
            check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
            if comm.Get_rank() == 0
            else None,
            root=0,
        )
        y_encoded, n_out, multiclass, pos, neg = self._encode_targets(
            comm, y, [rank["labels"] for rank in gathered], partial, fresh, classes
        )
        penalty = self.penalty is not None
        l1_ratio = {"l2": 0.0, "l1": 1.0, "elasticnet": self.l1_ratio, None: 0.0}[self.penalty]
        setup = training.Setup(
            **options.setup_values(self),
            l2=self.alpha * (1 - l1_ratio) if penalty else 0.0,
            l1=self.alpha * l1_ratio if penalty else 0.0,
            n_features=width,
            n_out=n_out,
            multiclass=multiclass,
            pos_weight=pos,
            neg_weight=neg,
            # a rank alone sends nothing: it rounds nothing
            value_dtype=np.dtype(
                self.exchange_dtype if self.exchange_dtype and ranks > 1 else X.dtype
            ),
            seed=seed,
            average=self.average if self.average == "auto" else int(self.average),
            intercept_decay=SPARSE_INTERCEPT_DECAY if sparse_input else 1.0,
            classifier=isinstance(self, ClassifierMixin),
        )
        return setup, X, y_encoded, sample_weight, stops_early

    def _initial_weights(self, setup, partial, coef_init, intercept_init, previous_classes):
        """The weights to start from: those of the last fit (``partial_fit``, or ``fit``
        with ``warm_start``), else ``coef_init`` and ``intercept_init``, else zeros. Shapes
        are checked as scikit-learn checks them."""
        if partial and hasattr(self, "coef_"):
            return self._weights
        weights = training.Weights.zeros(setup)
        names = ("coef_init", "intercept_init")
        if not partial and self.warm_start and hasattr(self, "coef_"):
            names = ("coef_ (warm_start=True)", "intercept_ (warm_start=True)")
            if previous_classes is not None and not same(previous_classes, self.classes_):
                raise ValueError(
                    "warm_start=True continues from the model of the classes "
                    f"{previous_classes.tolist()}, but y holds the classes "
                    f"{self.classes_.tolist()}; fit with warm_start=False to start anew."
                )
            coef_init = self.coef_ if coef_init is None else coef_init
            intercept_init = self.intercept_ if intercept_init is None else intercept_init
        n_out, n_features = setup.n_out, setup.n_features
        if coef_init is not None:
            coef = np.asarray(coef_init.toarray() if sp.issparse(coef_init) else coef_init)
            if n_out == 1:  # as scikit-learn: any shape of n_features weights
                shape = f"({n_features},) or (1, {n_features})"
                fits = coef.size == n_features and coef.ndim <= 2
            else:
                shape = f"({n_out}, {n_features}) (classes, features)"
                fits = coef.shape == (n_out, n_features)
            if not fits:
                raise ValueError(
                    f"Provided {names[0]} does not match dataset: its shape must be {shape}; "
                    f"got {coef.shape}."
                )
            weights.v[:] = coef.ravel()
        if intercept_init is not None:
            intercept = np.asarray(intercept_init, np.float64)
            allowed = [(n_out,)] + ([()] if n_out == 1 else [])
            if intercept.shape not in allowed:
                shapes = " or ".join(map(str, allowed))
                raise ValueError(
                    f"Provided {names[1]} does not match dataset: its shape must be {shapes}; "
                    f"got {intercept.shape}."
                )
            weights.intercept[:] = intercept
        return weights

    def _stops_early(self, n_rows, partial):
        """Whether a fit of ``n_rows`` rows (all ranks together) holds rows out and stops
        on their score: ``early_stopping``, where ``"auto"`` means with
        :data:`EARLY_STOPPING_ROWS` rows or more, and a ``tol`` to stop by (never for
        ``partial_fit``)."""
        if partial or not self.early_stopping:
            return False
        if isinstance(self.early_stopping, str):  # "auto"
            return self.tol is not None and n_rows >= EARLY_STOPPING_ROWS
        return True

    def _hold_out(self, comm, y, row_weight, setup):
        """Which rows to set aside for early stopping: ``validation_fraction`` of them,
        the same rows however many ranks hold them (:mod:`sparcml_apps.training.holdout`),
        stratified by class; a mask of this rank's rows."""
        if not setup.classifier:
            strata, n_strata = np.zeros(y.size, np.int64), 1
        elif setup.multiclass:
            strata, n_strata = y.astype(np.int64), setup.n_out
        else:
            strata, n_strata = (y > 0).astype(np.int64), 2
        most = EARLY_STOPPING_ROWS if isinstance(self.early_stopping, str) else None  # "auto"
        held = holdout.held_out(
            strata, n_strata, self.validation_fraction, setup.seed, comm, most=most
        )
        held_weight = np.array([row_weight[held].sum()])
        if collectives.allreduce(held_weight, comm, algorithm="dense")[0] == 0:
            raise ValueError(
                "The sample weights for validation set are all zero, consider using a "
                "different random state."
            )
        return held

    def _detached(self):
        """A bare copy to send to other processes: the same parameters and state, with no
        communicator or processes of its own."""
        child = self.__class__.__new__(self.__class__)
        child.__dict__.update(self.__dict__)
        child.n_jobs = child.comm = None
        return child

    def _fitted_state(self, *, plain=False):
        """What fitting adds: the attributes ending in ``_`` and the training state; with
        ``plain``, the training state as a dict of its arrays (Dask sends the arrays of a
        dict as they are, and those of an object pickled: one more copy). See
        :meth:`_take_state`."""
        state = {k: v for k, v in self.__dict__.items() if k.endswith("_") or k == "_weights"}
        if plain and "_weights" in state:
            state["_weights"] = state["_weights"].arrays()
        return state

    def _take_state(self, state):
        """Take the fitted state that :meth:`_fitted_state` gave, plain or not."""
        if isinstance(state.get("_weights"), dict):
            state = {**state, "_weights": training.Weights.from_arrays(state["_weights"])}
        self.__dict__.update(state)

    def _adopt(self, fitted):
        """Become the estimator of the :class:`FitTask` a backend fitted, but for this
        one's own ``comm`` and ``n_jobs`` (nothing to do when it fitted this one)."""
        copy = fitted._estimator  # the task is of this package: its estimator, not theirs
        if copy is self:
            return self
        own = {"n_jobs": self.n_jobs, "comm": self.comm}
        self.__dict__.clear()
        self.__dict__.update({**copy.__dict__, **own})
        return self

    def _set_model(self, coef, intercept, dtype):
        """``coef_`` and ``intercept_`` as scikit-learn shapes them, in the data's dtype."""
        if not isinstance(self, ClassifierMixin):
            coef = coef.ravel()
        self.coef_, self.intercept_ = coef.astype(dtype), intercept.astype(dtype)

    def _report_to_callback(self, record, weights, *, dtype, comm, elsewhere):
        """Show ``callback`` the model as it stands after an epoch (averaged over the ranks
        of ``comm``, where the model averages); a copy that trains ``elsewhere`` (another
        process than the estimator's) shows it ``comm`` as its own."""
        if elsewhere:
            self.comm = comm
        # (the model's arrays, but coef_ and intercept_, go before the callback runs)
        self._set_model(*weights.model(comm, average=self.average), dtype)
        self.callback(self, record.as_dict())

    # -- using the model --------------------------------------------------------------

    def densify(self):
        """Convert a sparse ``coef_`` (after :meth:`sparsify`) back to a dense array.

        A ``coef_`` that is dense already stays as it is.

        Returns
        -------
        self : object
            This estimator.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before the first fit.

        See Also
        --------
        sparsify : Convert ``coef_`` to a scipy CSR matrix.

        Examples
        --------
        >>> from sparcml_apps import SparseSGDClassifier
        >>> from sparcml_apps.datasets import make_url_like
        >>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
        >>> model = SparseSGDClassifier(random_state=0).fit(X, y).sparsify()
        >>> type(model.densify().coef_).__name__, model.coef_.shape
        ('ndarray', (1, 10000))
        """
        check_is_fitted(self)
        if sp.issparse(self.coef_):
            self.coef_ = self.coef_.toarray()
        return self

    def sparsify(self):
        """Convert ``coef_`` to a scipy CSR matrix (smaller when most weights are zero).

        Prediction takes either form; the next fit sets a dense ``coef_`` again.

        Returns
        -------
        self : object
            This estimator.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before the first fit.

        See Also
        --------
        densify : Convert a sparse ``coef_`` back to a dense array.

        Examples
        --------
        >>> from sparcml_apps import SparseSGDClassifier
        >>> from sparcml_apps.datasets import make_url_like
        >>> X, y = make_url_like(3000, 10_000, 20, random_state=0)
        >>> model = SparseSGDClassifier(penalty="l1", random_state=0).fit(X, y)
        >>> model.sparsify().coef_.format, model.coef_.shape
        ('csr', (1, 10000))
        >>> model.coef_.nnz < 10_000
        True
        """
        check_is_fitted(self)
        self.coef_ = sp.csr_matrix(self.coef_)
        return self

    def _raw_scores(self, X):
        X = validate_predict_data(self, X)
        return np.asarray(safe_sparse_dot(X, self.coef_.T, dense_output=True)) + self.intercept_
