"""scikit-learn estimators trained by mini-batch SGD over sparse allreduce.

Where ``fit`` runs follows from what it is given: in this process (``MPI.COMM_SELF``,
the default); on the ranks of ``comm`` when every rank of an ``mpiexec`` job calls ``fit``
with its own rows (SPMD); on ``n_jobs`` local worker processes, an MPI job of their own
kept for the next fits (:mod:`sparcml_apps.jobs`); on the workers of a Dask cluster when
``X`` is a Dask array (:mod:`sparcml_apps.cluster`).
"""

import copy
import functools
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import (
    InvalidParameterError,
)
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

import collectives

from . import checkpoint, holdout, jobs, memory, options, training
from . import kernels as K
from .inputs import as_scipy

SPARSE_INTERCEPT_DECAY = 0.01  # as scikit-learn: sparse rows update the intercept less
EARLY_STOPPING_ROWS = 10_000
"""With ``early_stopping="auto"``, a fit of this many rows or more (all ranks together)
holds ``validation_fraction`` of them out, at most this many, and stops on their score:
the loss of the steps depends on the number of ranks (each rank's steps see its own rows
only), the score of the model does not. Ten thousand rows tell a change of ``tol=1e-3``
in accuracy from ten rows, and leave more rows to train on than a tenth of a large set."""
SIGNIFICANCE = 2.0
"""With ``early_stopping="auto"``, a rise of the held-out score counts only when it passes
``tol`` and this many standard errors of the rise (the two models' scores paired row by
row): a rise within the noise of the held-out rows neither keeps a fit going nor keeps it
from stopping, so fits that differ only in how slowly their score creeps (as fits on more
ranks do) stop alike."""
RANK_OWN = {"comm", "n_jobs", "callback", "verbose", "random_state"}
"""Parameters that may differ between ranks (rank 0's ``random_state`` seeds them all)."""
BOOL_IS_NOT_A_NUMBER = {
    "batch_size": "an int in the range [1, inf)",
    "local_steps": "an int in the range [1, inf) or 'auto'",
    "topk": "an int in the range [1, inf) or a float in the range (0, 1]",
}
"""Numeric parameters where True would be read as 1 (scikit-learn's checks accept it)."""


def _to_csr(X):
    return X.tocsr() if sp.issparse(X) else sp.csr_matrix(X)


def _same(a, b):
    """Whether two gathered values are equal (arrays compared whole)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


def _per_rank(records, key):
    """The values of ``key`` in the ranks' ``records``: "16 on ranks 0, 2; 17 on rank 1"."""
    groups = []
    for rank, record in enumerate(records):
        value = record[key]
        group = next((g for g in groups if _same(g[0], value)), None)
        if group is None:
            groups.append((value, [rank]))
        else:
            group[1].append(rank)
    return "; ".join(
        f"{(value.tolist() if isinstance(value, np.ndarray) else value)!r} on "
        f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
        for value, ranks in groups
    )


class _SparseSGD(BaseEstimator):
    """Parameters, validation and the training driver shared by both estimators."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_parameters(self):
        """The rules that tie parameters together."""
        name = type(self).__name__
        for param, expected in BOOL_IS_NOT_A_NUMBER.items():
            if isinstance(getattr(self, param), (bool, np.bool_)):
                raise InvalidParameterError(
                    f"The {param!r} parameter of {name} must be {expected}, not a bool. "
                    f"Got {getattr(self, param)!r} instead."
                )
        if self.penalty == "elasticnet" and self.l1_ratio is None:
            raise ValueError(
                f"l1_ratio must be set when penalty is 'elasticnet': the 'l1_ratio' parameter "
                f"of {name} must be a float in the range [0.0, 1.0] with that penalty. Got "
                "None instead."
            )
        if self.learning_rate in ("pa1", "pa2") and self.loss != self._passive_aggressive_loss:
            raise ValueError(
                f"Learning rate {self.learning_rate!r} only works with loss "
                f"{self._passive_aggressive_loss!r} (a passive-aggressive step is sized by "
                f"that loss). Got loss={self.loss!r} instead."
            )
        if self.learning_rate == "optimal" and self.alpha == 0:
            raise ValueError(
                f"The 'alpha' parameter of {name} must be > 0 with learning_rate='optimal' "
                "(it sets the learning rate). Got 0 instead."
            )
        if self.diagnostics and self.compression != "topk":
            raise ValueError(
                f"The 'diagnostics' parameter of {name} needs compression='topk' (it measures "
                f"TopK). Got diagnostics=True with compression={self.compression!r} instead."
            )
        for param in ("checkpoint_seconds", "resume"):
            if getattr(self, param) not in (None, False) and self.checkpoint is None:
                raise ValueError(
                    f"The {param!r} parameter of {name} needs a 'checkpoint' directory. Got "
                    f"{param}={getattr(self, param)!r} with checkpoint=None instead."
                )
        if self.comm is not None and self.n_jobs not in (None, 1):
            raise ValueError(
                f"{name} runs either on the ranks of 'comm' or on 'n_jobs' worker "
                f"processes. Got comm={self.comm!r} and n_jobs={self.n_jobs!r}."
            )

    # -- the data ---------------------------------------------------------------------

    def _validate_fit_data(self, X, y, sample_weight, reset, allow_empty=False):
        """Check one rank's data; with ``allow_empty`` it may hold no rows (others do)."""
        X, y = as_scipy(X), as_scipy(y)
        sparse_input = sp.issparse(X)
        X, y = validate_data(
            self,
            X,
            y,
            reset=reset,
            accept_sparse=["csr", "csc", "coo"],
            accept_large_sparse=True,
            dtype=[np.float64, np.float32],
            y_numeric=not isinstance(self, ClassifierMixin),
            ensure_min_samples=0 if allow_empty else 1,
        )
        if X.shape[0] == 0 and sample_weight is not None:  # other ranks hold the rows
            if np.ndim(sample_weight) and np.shape(sample_weight) != (0,):
                shape = np.shape(sample_weight)
                raise ValueError(f"sample_weight.shape == {shape}, expected (0,)!")
            sample_weight = None
        sample_weight = _check_sample_weight(
            sample_weight,
            X,
            dtype=np.float64,
            ensure_non_negative=X.shape[0] > 0,
            allow_all_zero_weights=True,  # the ranks' sum is checked (:meth:`_agree_on_data`)
        )
        labels = None
        if isinstance(self, ClassifierMixin):
            try:
                check_classification_targets(y)
                labels = unique_labels(y)
            except TypeError as exc:  # numpy cannot order labels of unlike types
                kinds = sorted({type(label).__name__ for label in np.ravel(y)})
                raise ValueError(
                    f"Mix of label input types (string and number): y holds {kinds}"
                ) from exc
        return _to_csr(X), y, sample_weight, sparse_input, labels

    def _validate_predict_data(self, X):
        check_is_fitted(self)
        X = validate_data(
            self,
            as_scipy(X),
            reset=False,
            accept_sparse="csr",
            accept_large_sparse=True,
            dtype=[np.float64, np.float32],
        )
        return X

    # -- fitting ----------------------------------------------------------------------

    def _fit_dispatch(self, X, y, *, method, **kwargs):
        """Fit here, on the ranks of ``comm``, on ``n_jobs`` worker processes, or on the
        workers of a Dask cluster when ``X`` is a Dask array."""
        self._check_parameters()
        if method == "partial_fit" and self.early_stopping not in (False, "auto"):
            raise ValueError("early_stopping should be False with partial_fit")
        if method == "partial_fit" and self.checkpoint is not None:
            raise ValueError(
                "checkpoint should be None with partial_fit: its caller holds the training "
                "state between calls (checkpoints are for fit)"
            )
        if hasattr(X, "__dask_graph__"):
            from . import cluster

            return cluster.fit(self, method, X, y, **kwargs)
        if jobs.workers(self.n_jobs) > 1:
            return jobs.fit(self, method, X, y, **kwargs)
        from mpi4py import MPI

        comm = self.comm if self.comm is not None else MPI.COMM_SELF
        return self._fit_on(comm, X, y, partial=method == "partial_fit", **kwargs)

    def _fit_on(
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
    ):
        """Fit on every rank of ``comm``, each rank with its own rows."""
        fresh = self._fresh(partial)
        previous_classes = getattr(self, "classes_", None)
        error = checked = None
        try:
            checked = self._validate_fit_data(
                X, y, sample_weight, reset=fresh, allow_empty=comm.Get_size() > 1
            )
        except Exception as exc:  # noqa: BLE001 - every rank raises it, below
            error = exc
        collectives.check(error, comm)
        setup, X, y_encoded, row_weight, weights, held = self._prepare(
            comm, checked, partial, fresh, previous_classes, classes, coef_init, intercept_init
        )
        if self.callback is not None:
            setup.callback = functools.partial(self._report_to_callback, dtype=X.dtype, comm=comm)
            setup.progress = getattr(self.callback, "steps", None)
        checkpoints = progress = resumed_from = None
        if self.checkpoint is not None:
            checkpoints = checkpoint.Checkpoints(
                self.checkpoint,
                self.checkpoint_seconds,
                self._resume_options(setup, comm),
                checkpoint.fingerprint(X, y_encoded, row_weight),
            )
            resumed = checkpoints.resume(comm) if self.resume else None
            if resumed is not None:
                weights, progress, resumed_from = resumed
        try:
            history = training.train(
                X,
                y_encoded,
                row_weight,
                setup,
                weights,
                comm,
                max_epochs=1 if partial else self.max_iter,
                check_convergence=not partial,
                held=held,
                significance=SIGNIFICANCE if isinstance(self.early_stopping, str) else 0.0,
                progress=progress,
                checkpoints=checkpoints,
                block_rows=memory.block_rows(X, setup.n_out * setup.n_features, comm),
            )
        except collectives.RankError:
            raise
        except Exception as exc:  # noqa: BLE001 - delivered to every rank
            collectives.check(exc, comm)
        self._store(weights, history, X.dtype, comm)
        self.resumed_from_ = None if resumed_from is None else str(resumed_from)
        diverged = [record.epoch for record in history if record.clipped]
        if diverged:
            warnings.warn(
                f"The steps diverged in epoch(s) {_ranges(diverged)}: the slope of the loss "
                f"exceeded {K.MAX_DLOSS:g} and was clipped. Scaling the input data "
                "(StandardScaler or MaxAbsScaler) or a smaller learning rate might help.",
                RuntimeWarning,
                stacklevel=3,
            )
        if not partial and self.tol is not None and len(history) == self.max_iter:
            warnings.warn(
                "Maximum number of iteration reached before convergence. Consider "
                "increasing max_iter to improve the fit.",
                ConvergenceWarning,
                stacklevel=3,
            )
        if not partial and self.power_t < 0:
            warnings.warn(
                "Negative values for `power_t` are deprecated, as in scikit-learn (which "
                "will refuse them): the rate eta0 / t ** power_t then grows without bound. "
                f"Use power_t >= 0. Got power_t={self.power_t!r}.",
                FutureWarning,
                stacklevel=3,
            )
        return self

    def _prepare(
        self, comm, checked, partial, fresh, previous_classes, classes, coef_init, intercept_init
    ):
        """What a fit does with the checked data (:meth:`_validate_fit_data`) before it
        trains, raising on every rank what does not fit: the setup, this rank's rows, their
        encoded targets and weights, the initial weights and the rows held out (or None)."""
        X, y, sample_weight, sparse_input, labels = checked
        setup, X, y_encoded, row_weight, stops_early = self._agree_on_data(
            comm, X, y, labels, sample_weight, sparse_input, partial, fresh, classes
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

    def _check_alone(
        self, method, X, y, *, sample_weight=None, classes=None, coef_init=None,
        intercept_init=None,
    ):  # fmt: skip
        """Check a fit's data and arguments in this process before other processes fit:
        raise what a fit here would raise before it trains. The checked ``(X, y,
        sample_weight)``; ``self`` learns only what checking the data learns (the width,
        the feature names)."""
        from mpi4py import MPI

        partial = method == "partial_fit"
        fresh = self._fresh(partial)
        checked = self._validate_fit_data(X, y, sample_weight, reset=fresh)
        probe = self._detached()  # what preparing sets (classes_) is set on the probe
        probe.random_state = copy.deepcopy(self.random_state)  # a seed drawn, not self's
        probe._prepare(
            MPI.COMM_SELF, checked, partial, fresh, getattr(self, "classes_", None),
            classes, coef_init, intercept_init,
        )  # fmt: skip
        return checked[:3]

    def _resume_options(self, setup, comm):
        """What a run must share with a checkpoint to resume from it: the options of the
        training (but how many epochs it may take), the classes and the number of ranks."""
        skipped = ("callback", "progress", "verbose")
        options = {k: v for k, v in setup.__dict__.items() if k not in skipped}
        options.update(
            value_dtype=np.dtype(setup.value_dtype).name,
            early_stopping=self.early_stopping,
            validation_fraction=self.validation_fraction,
            classes=getattr(self, "classes_", None),
            ranks=comm.Get_size(),
        )
        return options

    def _fresh(self, partial):
        """Whether this fit starts afresh (and so learns the width of ``X``)."""
        return not partial or not hasattr(self, "coef_")

    def _agree_on_data(
        self, comm, X, y, labels, sample_weight, sparse_input, partial, fresh, classes
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
        widths = sorted({rank["width"] for rank in gathered})
        if len(widths) > 1:
            raise ValueError(
                f"The ranks passed X with different numbers of features: {widths}. Every "
                "rank must pass rows of the same width."
            )
        holding = [rank for rank in gathered if rank["rows"]] or gathered
        dtypes = [rank["dtype"] for rank in holding]
        if len(set(dtypes)) > 1:
            raise ValueError(
                f"The ranks passed X of different dtypes: {_per_rank(gathered, 'dtype')}. "
                "Every rank must pass the same dtype (float32 or float64)."
            )
        for param in mine["params"]:
            values = [rank["params"][param] for rank in gathered]
            if any(not _same(value, values[0]) for value in values):
                raise ValueError(
                    f"The {param!r} parameter of {name} must be the same on every rank. "
                    f"Got {_per_rank([rank['params'] for rank in gathered], param)}."
                )
        if any(not _same(rank["classes"], gathered[0]["classes"]) for rank in gathered):
            raise ValueError(
                "The 'classes' of partial_fit must be the same on every rank. Got "
                f"{_per_rank(gathered, 'classes')}."
            )
        n_rows = sum(rank["rows"] for rank in gathered)
        if n_rows == 0:
            raise ValueError(
                f"Found array with 0 sample(s) on all {comm.Get_size()} ranks, while a "
                "minimum of 1 is required."
            )
        stops_early = self._stops_early(n_rows, partial)
        # rows held out have their weights checked first (:meth:`_hold_out`)
        if sum(rank["weight"] for rank in gathered) == 0 and not stops_early:
            raise ValueError("Sample weights must contain at least one non-zero number.")
        X = X.astype(dtypes[0], copy=False)  # a rank without rows takes the others' dtype
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
            n_features=widths[0],
            n_out=n_out,
            multiclass=multiclass,
            pos_weight=pos,
            neg_weight=neg,
            # a rank alone sends nothing: it rounds nothing
            value_dtype=np.dtype(
                self.exchange_dtype if self.exchange_dtype and comm.Get_size() > 1 else X.dtype
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
            if previous_classes is not None and not _same(previous_classes, self.classes_):
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
        the same rows however many ranks hold them (:mod:`sparcml_apps.holdout`),
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
        :meth:`_adopt`."""
        state = {k: v for k, v in self.__dict__.items() if k.endswith("_") or k == "_weights"}
        if plain and "_weights" in state:
            state["_weights"] = state["_weights"].arrays()
        return state

    def _adopt(self, state):
        """Take the fitted state that :meth:`_fitted_state` gave, plain or not."""
        if isinstance(state.get("_weights"), dict):
            state = {**state, "_weights": training.Weights.from_arrays(state["_weights"])}
        self.__dict__.update(state)

    def _set_model(self, coef, intercept, dtype):
        """``coef_`` and ``intercept_`` as scikit-learn shapes them, in the data's dtype."""
        if not isinstance(self, ClassifierMixin):
            coef = coef.ravel()
        self.coef_, self.intercept_ = coef.astype(dtype), intercept.astype(dtype)

    def _report_to_callback(self, record, weights, *, dtype, comm):
        self._set_model(*self._model_of(weights, comm), dtype)
        self.callback(self, record.as_dict())

    def _model_of(self, weights, comm, agree=False):
        """The weights and intercepts the model is: averaged (over the ranks of ``comm``;
        with ``agree`` they then hold the same state), or current."""
        if self.average:
            return weights.averaged(comm, agree=agree)
        return weights.coef(), weights.intercept

    def _store(self, weights, history, dtype, comm):
        """Keep the training state and set the fitted attributes (every rank alike)."""
        self._weights = weights
        self._set_model(*self._model_of(weights, comm, agree=True), dtype)
        self.n_iter_ = len(history)
        self.t_ = weights.t
        self.comm_stats_ = [record.as_dict() for record in history]

    # -- using the model --------------------------------------------------------------

    def densify(self):
        """Convert a sparse ``coef_`` (after :meth:`sparsify`) back to a dense array."""
        check_is_fitted(self)
        if sp.issparse(self.coef_):
            self.coef_ = self.coef_.toarray()
        return self

    def sparsify(self):
        """Convert ``coef_`` to a scipy CSR matrix (smaller when most weights are zero)."""
        check_is_fitted(self)
        self.coef_ = sp.csr_matrix(self.coef_)
        return self

    def _raw_scores(self, X):
        X = self._validate_predict_data(X)
        return np.asarray(safe_sparse_dot(X, self.coef_.T, dense_output=True)) + self.intercept_


class SparseSGDClassifier(ClassifierMixin, _SparseSGD):
    __doc__ = options.docstring(
        options.CLASSIFIER,
        """Linear classifiers (SVM, logistic regression, ...) by SGD over sparse allreduce.

The parameters shared with :class:`sklearn.linear_model.SGDClassifier` mean what they mean
there and take the same values, but for the differences listed, each with its reason, in
docs/sklearn-differences.md. Every rank takes SGD steps on its own rows; every
``local_steps`` steps the ranks average their changes to the model
(:mod:`sparcml_apps.exchange`). Where ``fit`` runs follows from what it is given: in
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

Examples
--------
>>> from sklearn.datasets import make_classification
>>> from sparcml_apps import SparseSGDClassifier
>>> X, y = make_classification(2000, 20, random_state=0)
>>> model = SparseSGDClassifier(loss="log_loss", random_state=0).fit(X, y)
>>> model.score(X, y) > 0.9
True
>>> model.predict_proba(X[:2]).shape
(2, 2)""",
    )

    _passive_aggressive_loss = "hinge"  # the loss learning_rate="pa1" and "pa2" go with
    _parameter_constraints = options.constraints(options.CLASSIFIER)
    __init__ = options.init(options.CLASSIFIER)

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
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch over ``(X, y)``; ``classes`` is required on the first call."""
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
        """Confidence scores: shape (n_samples,) for two classes, else one column a class."""
        scores = self._raw_scores(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """The class of each row."""
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
        """Probability of each class (log_loss: logistic; modified_huber: clipped)."""
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
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


class SparseSGDRegressor(RegressorMixin, _SparseSGD):
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


def _ranges(numbers):
    """Sorted integers as runs: ``[1, 2, 3, 7]`` reads ``1-3, 7``."""
    runs = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
