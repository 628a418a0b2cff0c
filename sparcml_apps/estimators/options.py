"""The estimators' options, declared once: name, default, constraint and meaning.

The estimators' signatures, their ``_parameter_constraints`` and the Parameters of their
docstrings are made from :data:`OPTIONS` (:func:`signature`, :func:`constraints`,
:func:`parameters_doc`), and the options the training loop reads pass to
:class:`sparcml_apps.training.Setup` under the name each declares (:func:`setup_values`).
Adding an option is one entry here, and its use.
"""

import inspect
import os
import textwrap
from dataclasses import dataclass
from numbers import Integral, Real

from sklearn.utils._param_validation import HasMethods, Interval, Options, StrOptions

import collectives

from ..training import kernels

CLASSIFIER, REGRESSOR = "classifier", "regressor"
REGRESSION_LOSSES = ("squared_error", "huber", "epsilon_insensitive", "squared_epsilon_insensitive")
"""The regressor's losses; the classifier takes every loss (the regression ones fit +-1)."""
_ABSENT = object()


@dataclass(frozen=True)
class Option:
    """One parameter of the estimators.

    ``default`` is the classifier's, ``regressor`` the regressor's where it differs (or
    None: the option is the classifier's alone); ``constraint`` is scikit-learn's list of
    what the value may be; ``kind`` and ``doc`` are the docstring's type (its default is
    added) and meaning; ``setup`` the field of the training setup that takes the value as it is
    (None: the estimator reads it, or the setup takes it transformed).
    """

    name: str
    default: object
    constraint: list
    kind: str
    doc: str
    setup: str | None = None
    regressor: object = _ABSENT

    def default_of(self, estimator):
        """The default on ``estimator`` (:data:`CLASSIFIER` or :data:`REGRESSOR`)."""
        if estimator == REGRESSOR and self.regressor is not _ABSENT:
            return self.regressor
        return self.default

    def on(self, estimator):
        """Whether ``estimator`` takes this option."""
        return estimator == CLASSIFIER or self.regressor is not None


def _interval(kind, low, high, closed):
    return Interval(kind, low, high, closed=closed)


OPTIONS = (
    Option(
        "loss", "hinge", [StrOptions(set(kernels.LOSSES))],
        "str",
        "The loss of a row: 'hinge' (linear SVM), 'log_loss' (logistic regression), "
        "'modified_huber', 'squared_hinge', 'perceptron', and the regression losses "
        "'squared_error', 'huber', 'epsilon_insensitive', 'squared_epsilon_insensitive' "
        "(the classifier fits them to +-1 a class; the regressor takes these only).",
        setup="loss", regressor="squared_error",
    ),
    Option(
        "penalty", "l2", [StrOptions({"l2", "l1", "elasticnet"}), None],
        "{'l2', 'l1', 'elasticnet'} or None",
        "The regularization term.",
    ),
    Option(
        "alpha", 0.0001, [_interval(Real, 0, None, "left")], "float",
        "The strength of the penalty; with learning_rate='optimal' it also sets the rate.",
        setup="alpha",
    ),
    Option(
        "l1_ratio", 0.15, [_interval(Real, 0, 1, "both"), None],
        "float in [0, 1] or None",
        "The share of L1 in the elastic net penalty (None: only where penalty is not "
        "'elasticnet').",
    ),
    Option(
        "fit_intercept", True, ["boolean"], "bool",
        "Whether to fit an intercept.", setup="fit_intercept",
    ),
    Option(
        "max_iter", 1000, [_interval(Integral, 1, None, "left")], "int",
        "The most epochs ``fit`` runs.",
    ),
    Option(
        "tol", 1e-3, [_interval(Real, 0, None, "left"), None], "float or None",
        "The least improvement an epoch must make (see ``early_stopping``); None: run "
        "``max_iter`` epochs.", setup="tol",
    ),
    Option(
        "shuffle", True, ["boolean"], "bool",
        "Whether every rank shuffles its rows every epoch.", setup="shuffle",
    ),
    Option(
        "verbose", 0, ["verbose"], "int",
        "Print a line an epoch on rank 0.", setup="verbose",
    ),
    Option(
        "epsilon", 0.1, [_interval(Real, 0, None, "left")], "float",
        "The width of the insensitive zone of the epsilon-insensitive losses, and where "
        "huber turns linear.", setup="loss_param",
    ),
    Option(
        "random_state", None, ["random_state"], "int, RandomState or None",
        "Seeds the shuffles and the held-out rows (rank 0's seeds every rank).",
    ),
    Option(
        "learning_rate", "optimal", [StrOptions(set(kernels.SCHEDULES))],
        "str",
        "The schedule of the rate: 'optimal', 'invscaling', 'constant', 'adaptive', or "
        "the passive-aggressive 'pa1' and 'pa2' (with the hinge loss, or the regressor's "
        "epsilon_insensitive).", setup="learning_rate", regressor="invscaling",
    ),
    Option(
        "eta0", 0.01, [_interval(Real, 0, None, "neither")], "float",
        "The initial rate of 'constant', 'invscaling' and 'adaptive'; the most a "
        "passive-aggressive step takes.", setup="eta0",
    ),
    Option(
        "power_t", 0.5, [_interval(Real, None, None, "neither")],
        "float",
        "The exponent of 'invscaling' (a negative one is deprecated, as scikit-learn's).",
        setup="power_t", regressor=0.25,
    ),
    Option(
        "early_stopping", "auto", ["boolean", StrOptions({"auto"})],
        "bool or 'auto'",
        "True: hold ``validation_fraction`` of the rows out and stop once their score "
        "has not risen by ``tol`` for ``n_iter_no_change`` epochs; False: stop once the "
        "objective of the epochs' steps (their loss and the penalty) has not fallen by "
        "``tol``; 'auto': True for a fit of 10,000 rows or more (all ranks together) with "
        "a ``tol``, holding out at most 10,000 of them, else False, and a rise of the "
        "score over the last epoch whose rise counted then counts only when it also "
        "passes two standard errors of the difference of two scores of the held-out "
        "rows. The score is that of the model the fit returns (the average, once "
        "averaging began), so P ranks stop near where one would. Never for "
        "``partial_fit``.",
    ),
    Option(
        "validation_fraction", 0.1, [_interval(Real, 0, 1, "neither")],
        "float in (0, 1)",
        "The share of the rows held out with early stopping (the same rows whatever the "
        "number of ranks).",
    ),
    Option(
        "n_iter_no_change", 5, [_interval(Integral, 1, None, "left")], "int",
        "Epochs without improvement before a fit stops.", setup="n_iter_no_change",
    ),
    Option(
        "class_weight", None, [StrOptions({"balanced"}), dict, None],
        "dict, 'balanced' or None",
        "Weights of the classes ('balanced': inversely to their counts over every rank).",
        regressor=None,
    ),
    Option(
        "warm_start", False, ["boolean"], "bool",
        "Whether ``fit`` goes on from the model of the last fit.",
    ),
    Option(
        "average", "auto",
        [_interval(Integral, 0, None, "neither"), "boolean", StrOptions({"auto"})],
        "bool, int or 'auto'",
        "True: average every step's weights; n: from sample time n on; 'auto': from the "
        "second epoch of the first fit on. With several ranks the average is that of the "
        "ranks' own models (of the agreed one with TopK).", regressor=False,
    ),
    Option(
        "batch_size", 1, [_interval(Integral, 1, None, "left")], "int",
        "Rows per rank per step: a step applies the mean of their gradients. With 1 on "
        "one rank, it is scikit-learn's per-row SGD.", setup="batch_size",
    ),
    Option(
        "local_steps", "auto", [_interval(Integral, 1, None, "left"), StrOptions({"auto"})],
        "int or 'auto'",
        "Steps each rank takes between exchanges. 'auto': the shortest period whose "
        "exchange the cost model (:func:`collectives.cost_constants`) expects to take at "
        "most a tenth of the steps' time, from how the columns of the rows grow, and short "
        "enough for a first epoch of an exchange for every pair of ranks; later epochs "
        "exchange less often as the learning rate falls.",
        setup="local_steps",
    ),
    Option(
        "compression", None, [StrOptions({"topk"}), None], "{None, 'topk'}",
        "'topk' sends only the largest entries of each rank's changes.",
        setup="compression",
    ),
    Option(
        "topk", 0.01,
        [_interval(Integral, 1, None, "left"), _interval(Real, 0, 1, "right")],
        "float in (0, 1] or int >= 1",
        "How many entries TopK keeps a step (an exchange after n steps keeps n times as "
        "many): a fraction of the model's coordinates, or a count.", setup="topk",
    ),
    Option(
        "error_feedback", True, ["boolean"], "bool",
        "Keep what TopK did not send and add it to the next exchange (else it is dropped).",
        setup="error_feedback",
    ),
    Option(
        "diagnostics", False, ["boolean"], "bool",
        "With compression='topk', record every exchange the quantities of the TopK "
        "convergence analysis (:mod:`sparcml_apps.training.diagnostics`): ``gamma``, the largest "
        "over the ranks of ||acc - TopK(acc)|| / ||acc|| (acc: a rank's residual plus its "
        "changes), and ``xi``, how far the sum of the ranks' TopKs is from the TopK of "
        "their sum. Costs one more exact allreduce an exchange; the model is the same.",
        setup="diagnostics",
    ),
    Option(
        "allreduce", "auto", [StrOptions({"auto", *collectives.ALGORITHMS})],
        "str", "The algorithm of :func:`collectives.allreduce`.",
        setup="algorithm",
    ),
    Option(
        "quantization_bits", None, [Options(Integral, set(collectives.BITS)), None],
        "{2, 4, 8} or None",
        "Send the values of every exchange as QSGD codes of this many bits (unbiased; the "
        "dense algorithm sums exactly). A rank alone sends nothing, so rounds nothing.",
        setup="quantization_bits",
    ),
    Option(
        "exchange_dtype", "float32", [StrOptions({"float32", "float64"}), None],
        "{'float32', 'float64'} or None",
        "The dtype the changes travel and are summed in (the model stays float64): "
        "float32 sends half of float64's bytes, each rank's change rounded to 7 "
        "significant digits; None: the data's dtype. A rank alone sends nothing, so "
        "rounds nothing.",
    ),
    Option(
        "overlap", False, ["boolean"], "bool",
        "Let an exchange travel (non-blocking allreduce) while the next period's steps "
        "run; the ranks' changes then reach the others one period late.", setup="overlap",
    ),
    Option(
        "comm", None, [HasMethods(["Get_rank", "Get_size", "Allgather"]), None],
        "mpi4py communicator",
        "Train on its ranks: every rank calls ``fit`` with its own rows (under mpiexec).",
    ),
    Option(
        "n_jobs", None,
        [_interval(Integral, 1, None, "left"), _interval(Integral, None, -1, "right"), None],
        "int",
        "Train on this many local worker processes (an MPI job of their own, which cannot "
        "end this process), started at the first such fit and kept for the next ones until "
        ":func:`sparcml_apps.jobs.close`, 5 idle minutes or the end of this process; -1 "
        "means one per core, -2 all cores but one, and so on. None or 1: in this process.",
    ),
    Option(
        "callback", None, [callable, None], "callable",
        "Called on every rank after every epoch as ``callback(estimator, record)`` with "
        "the current ``coef_``/``intercept_`` set and the epoch's record (loss, seconds, "
        "traffic). If it also has a method ``steps(done, rows)``, rank 0 calls that within "
        "every epoch with the rows of its own it has stepped over (every 16,384 steps and "
        "at the end), for a progress bar.",
    ),
    Option(
        "checkpoint", None, [str, os.PathLike, None], "str or path",
        "A directory (the same on every rank) where ``fit`` saves the whole training state "
        "after every epoch: every rank's weights and state arrays, the epoch and where the "
        "run stands (:mod:`sparcml_apps.training.checkpoint`; each file written atomically "
        "with its sha256; the newest two complete checkpoints are kept).",
    ),
    Option(
        "checkpoint_seconds", None, [_interval(Real, 0, None, "neither"), None],
        "float",
        "With ``checkpoint``, also save within an epoch once this many seconds have passed "
        "since the last save, where the epoch can be resumed from (one rank: every 4,096 "
        "steps; several: at an exchange; not with ``overlap``).",
    ),
    Option(
        "resume", False, ["boolean"], "bool",
        "With ``checkpoint``, ``fit`` continues from the newest complete checkpoint there "
        "(a damaged one is passed over with a warning), if any, and ends with the model of "
        "a run never stopped, bit for bit. A checkpoint of other options (but "
        "``max_iter``), data or number of ranks is refused, naming what differs.",
    ),
)  # fmt: skip
"""Every option, in the order of the estimators' signatures."""


def of(estimator):
    """The options ``estimator`` (:data:`CLASSIFIER` or :data:`REGRESSOR`) takes."""
    return [option for option in OPTIONS if option.on(estimator)]


def constraints(estimator):
    """scikit-learn's ``_parameter_constraints`` of ``estimator``."""
    found = {option.name: option.constraint for option in of(estimator)}
    if estimator == REGRESSOR:
        found["loss"] = [StrOptions(set(REGRESSION_LOSSES))]
    return found


def signature(estimator):
    """The signature of ``estimator``'s ``__init__``: ``loss`` first (positional or by
    name), then every other option by name, with its default."""
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [self]
    for option in of(estimator):
        kind = inspect.Parameter.KEYWORD_ONLY
        if option.name == "loss":
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        parameters.append(
            inspect.Parameter(option.name, kind, default=option.default_of(estimator))
        )
    return inspect.Signature(parameters)


def init(estimator):
    """An ``__init__`` of :func:`signature` that stores every argument as an attribute
    of the same name, and does nothing else (as scikit-learn's estimators do)."""
    made = signature(estimator)

    def __init__(self, *args, **kwargs):
        try:
            bound = made.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{type(self).__name__}.__init__() {exc}") from None
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            if name != "self":
                setattr(self, name, value)

    __init__.__signature__ = made
    return __init__


def parameters_doc(estimator):
    """The Parameters section of ``estimator``'s docstring (numpydoc)."""
    lines = ["Parameters", "----------"]
    for option in of(estimator):
        lines.append(f"{option.name} : {option.kind}, default={option.default_of(estimator)!r}")
        lines += [f"    {line}" for line in _wrap(option.doc)]
    return "\n".join(lines)


def docstring(estimator, head, tail):
    """``estimator``'s docstring: ``head`` (summary and description), the Parameters
    section (:func:`parameters_doc`), then ``tail`` (Attributes, Examples...)."""
    return f"{head}\n\n{parameters_doc(estimator)}\n\n{tail}\n"


def setup_values(estimator):
    """The options the training setup takes as they are, by the setup's names."""
    return {
        option.setup: getattr(estimator, option.name)
        for option in OPTIONS
        if option.setup is not None
    }


def _wrap(text, width=84):
    return textwrap.wrap(text, width, break_on_hyphens=False)
