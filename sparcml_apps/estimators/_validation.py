"""The checks of the estimators' parameters and data, and the messages of what fails."""

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..inputs import as_scipy

RANK_OWN = {"comm", "n_jobs", "callback", "verbose", "random_state"}
"""Parameters that may differ between ranks (rank 0's ``random_state`` seeds them all)."""
BOOL_IS_NOT_A_NUMBER = {
    "batch_size": "an int in the range [1, inf)",
    "local_steps": "an int in the range [1, inf) or 'auto'",
    "topk": "an int in the range [1, inf) or a float in the range (0, 1]",
}
"""Numeric parameters where True would be read as 1 (scikit-learn's checks accept it)."""


def to_csr(X):
    """``X`` as a scipy CSR matrix."""
    return X.tocsr() if sp.issparse(X) else sp.csr_matrix(X)


def same(a, b):
    """Whether two gathered values are equal (arrays compared whole)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


def per_rank(records, key):
    """The values of ``key`` in the ranks' ``records``: "16 on ranks 0, 2; 17 on rank 1"."""
    groups = []
    for rank, record in enumerate(records):
        value = record[key]
        group = next((g for g in groups if same(g[0], value)), None)
        if group is None:
            groups.append((value, [rank]))
        else:
            group[1].append(rank)
    return "; ".join(
        f"{(value.tolist() if isinstance(value, np.ndarray) else value)!r} on "
        f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
        for value, ranks in groups
    )


def check_parameters(estimator):
    """Raise unless the parameters of ``estimator`` keep the rules that tie them together."""
    name = type(estimator).__name__
    for param, expected in BOOL_IS_NOT_A_NUMBER.items():
        if isinstance(getattr(estimator, param), (bool, np.bool_)):
            raise InvalidParameterError(
                f"The {param!r} parameter of {name} must be {expected}, not a bool. "
                f"Got {getattr(estimator, param)!r} instead."
            )
    if estimator.penalty == "elasticnet" and estimator.l1_ratio is None:
        raise ValueError(
            f"l1_ratio must be set when penalty is 'elasticnet': the 'l1_ratio' parameter "
            f"of {name} must be a float in the range [0.0, 1.0] with that penalty. Got "
            "None instead."
        )
    if (
        estimator.learning_rate in ("pa1", "pa2")
        and estimator.loss != estimator._passive_aggressive_loss
    ):
        raise ValueError(
            f"Learning rate {estimator.learning_rate!r} only works with loss "
            f"{estimator._passive_aggressive_loss!r} (a passive-aggressive step is sized by "
            f"that loss). Got loss={estimator.loss!r} instead."
        )
    if estimator.learning_rate == "optimal" and estimator.alpha == 0:
        raise ValueError(
            f"The 'alpha' parameter of {name} must be > 0 with learning_rate='optimal' "
            "(it sets the learning rate). Got 0 instead."
        )
    if estimator.diagnostics and estimator.compression != "topk":
        raise ValueError(
            f"The 'diagnostics' parameter of {name} needs compression='topk' (it measures "
            f"TopK). Got diagnostics=True with compression={estimator.compression!r} instead."
        )
    for param in ("checkpoint_seconds", "resume"):
        if getattr(estimator, param) not in (None, False) and estimator.checkpoint is None:
            raise ValueError(
                f"The {param!r} parameter of {name} needs a 'checkpoint' directory. Got "
                f"{param}={getattr(estimator, param)!r} with checkpoint=None instead."
            )
    if estimator.comm is not None and estimator.n_jobs not in (None, 1):
        raise ValueError(
            f"{name} runs either on the ranks of 'comm' or on 'n_jobs' worker "
            f"processes. Got comm={estimator.comm!r} and n_jobs={estimator.n_jobs!r}."
        )


def validate_fit_data(estimator, X, y, sample_weight, reset, allow_empty=False):
    """Check one rank's data for a fit of ``estimator``; with ``allow_empty`` it may hold
    no rows (others do)."""
    X, y = as_scipy(X), as_scipy(y)
    sparse_input = sp.issparse(X)
    X, y = validate_data(
        estimator,
        X,
        y,
        reset=reset,
        accept_sparse=["csr", "csc", "coo"],
        accept_large_sparse=True,
        dtype=[np.float64, np.float32],
        y_numeric=not isinstance(estimator, ClassifierMixin),
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
    if isinstance(estimator, ClassifierMixin):
        try:
            check_classification_targets(y)
            labels = unique_labels(y)
        except TypeError as exc:  # numpy cannot order labels of unlike types
            kinds = sorted({type(label).__name__ for label in np.ravel(y)})
            raise ValueError(
                f"Mix of label input types (string and number): y holds {kinds}"
            ) from exc
    return to_csr(X), y, sample_weight, sparse_input, labels


def validate_predict_data(estimator, X):
    """Check rows to predict for (``estimator`` fitted, of its width)."""
    check_is_fitted(estimator)
    X = validate_data(
        estimator,
        as_scipy(X),
        reset=False,
        accept_sparse="csr",
        accept_large_sparse=True,
        dtype=[np.float64, np.float32],
    )
    return X


def check_agreement(name, gathered):
    """Raise unless the records the ranks gathered (one a rank: the width, dtype and
    number of their rows, the parameters of estimator ``name`` and the ``classes``) fit
    together; the width, the records of the ranks that hold rows (all, when none does)
    and the number of rows of all ranks together."""
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
            f"The ranks passed X of different dtypes: {per_rank(gathered, 'dtype')}. "
            "Every rank must pass the same dtype (float32 or float64)."
        )
    for param in gathered[0]["params"]:
        values = [rank["params"][param] for rank in gathered]
        if any(not same(value, values[0]) for value in values):
            raise ValueError(
                f"The {param!r} parameter of {name} must be the same on every rank. "
                f"Got {per_rank([rank['params'] for rank in gathered], param)}."
            )
    if any(not same(rank["classes"], gathered[0]["classes"]) for rank in gathered):
        raise ValueError(
            "The 'classes' of partial_fit must be the same on every rank. Got "
            f"{per_rank(gathered, 'classes')}."
        )
    n_rows = sum(rank["rows"] for rank in gathered)
    if n_rows == 0:
        raise ValueError(
            f"Found array with 0 sample(s) on all {len(gathered)} ranks, while a "
            "minimum of 1 is required."
        )
    return widths[0], holding, n_rows


def ranges(numbers):
    """Sorted integers as runs: ``[1, 2, 3, 7]`` reads ``1-3, 7``."""
    runs = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
