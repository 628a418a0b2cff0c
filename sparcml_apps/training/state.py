"""The state of a training run: its setup, the weights, the record of an epoch, and where a
run stands (what a checkpoint holds besides the weights)."""

import math
from dataclasses import dataclass, field

import numpy as np

import collectives
from collectives import Stats

from . import kernels


@dataclass
class Setup:
    """What the loop needs to know besides the data and the weights."""

    loss: str
    alpha: float  # sets the "optimal" schedule
    l2: float  # L2 strength: alpha * (1 - l1_ratio) with a penalty, else 0
    l1: float  # L1 strength: alpha * l1_ratio with a penalty, else 0
    fit_intercept: bool
    learning_rate: str
    eta0: float
    power_t: float
    batch_size: int
    n_features: int
    n_out: int  # weight vectors: 1 for binary and regression, else one per class
    multiclass: bool
    pos_weight: np.ndarray  # per output: weight of rows whose target is +1 ...
    neg_weight: np.ndarray  # ... and of the others
    value_dtype: np.dtype  # of the vectors sent
    loss_param: float = 0.1  # epsilon of huber and the epsilon-insensitive losses
    shuffle: bool = True
    seed: int = 0
    tol: float | None = 1e-3
    n_iter_no_change: int = 5
    average: int | str = 0  # 0: none; n: from sample time n on; "auto": from the 2nd epoch
    local_steps: int | str = "auto"  # steps between exchanges
    compression: str | None = None
    topk: float = 0.01  # fraction of the coordinates (float) or a count (int)
    error_feedback: bool = True
    diagnostics: bool = False  # record TopK's gamma and xi every exchange
    algorithm: str = "auto"
    quantization_bits: int | None = None
    overlap: bool = False
    intercept_decay: float = 1.0
    verbose: int = 0
    classifier: bool = True
    callback: object = None
    progress: object = None  # on rank 0, progress(rows done, rows) within epochs

    @property
    def size(self):
        """Length of the vectors sent: every weight, then the intercepts."""
        return self.n_out * self.n_features + self.n_out

    def k(self, period=1):
        """The number of weights TopK keeps at an exchange after ``period`` local steps:
        ``topk`` a step (the intercepts always travel)."""
        n_weights = self.n_out * self.n_features
        if isinstance(self.topk, (int, np.integer)):
            return min(int(self.topk) * period, n_weights)
        return min(max(1, int(round(self.topk * n_weights))) * period, n_weights)

    def params(self):
        """The options as the kernels read them."""
        params = np.zeros(kernels.N_PARAMS)
        params[kernels.SCHEDULE] = kernels.SCHEDULES[self.learning_rate]
        params[kernels.ETA0] = self.eta0
        params[kernels.POWER_T] = self.power_t
        params[kernels.ALPHA] = self.alpha
        if self.learning_rate == "optimal":
            # as scikit-learn: the first step at the rate a typical weight would take
            typical = math.sqrt(1.0 / math.sqrt(self.alpha))
            slope = kernels.loss_and_slope(
                kernels.LOSSES[self.loss], -typical, 1.0, self.loss_param
            )[1]
            params[kernels.T0] = 1.0 / (typical / max(1.0, slope) * self.alpha)
        params[kernels.L2] = self.l2
        params[kernels.L1] = self.l1
        params[kernels.INTERCEPT_DECAY] = self.intercept_decay
        params[kernels.AVERAGE_START] = 0 if self.average == "auto" else self.average
        params[kernels.LOSS] = kernels.LOSSES[self.loss]
        params[kernels.LOSS_PARAM] = self.loss_param
        params[kernels.N_FEATURES] = self.n_features
        params[kernels.N_OUT] = self.n_out
        params[kernels.MULTICLASS] = self.multiclass
        params[kernels.FIT_INTERCEPT] = self.fit_intercept
        return params


EMPTY = np.empty(0)  # stands for a state array the options do not need


@dataclass
class Weights:
    """The model as training holds it: ``w = wscale * v``, with averaging and L1 state;
    with several ranks also the model as they last agreed on it, while they train
    (:meth:`drop_agreed`). With averaging, ``v`` and ``offsets`` are the two columns of
    one array (:meth:`prepare`), and pickle as it."""

    v: np.ndarray
    intercept: np.ndarray
    state: np.ndarray = None  # the running scalars, indexed as in kernels
    epochs: int = 0
    l1_applied: np.ndarray = field(default_factory=lambda: EMPTY)
    offsets: np.ndarray = field(default_factory=lambda: EMPTY)  # averaging
    average_intercept: np.ndarray = field(default_factory=lambda: EMPTY)
    agreed: np.ndarray = field(default_factory=lambda: EMPTY)  # several ranks
    agreed_intercept: np.ndarray = field(default_factory=lambda: EMPTY)
    average_start: int = 0  # the sample time averaging starts at, once chosen
    period: int = 0  # local steps between exchanges, once chosen
    listing: bool = False  # find a rank's changes from a list of the weights it touched
    dense: bool = False  # write a rank's changes dense (their sum is expected dense)
    residual: np.ndarray | None = None  # TopK error feedback
    in_support: np.ndarray | None = None
    support: np.ndarray | None = None
    n_support: int = 0

    def __post_init__(self):
        if self.state is None:
            self.state = np.zeros(kernels.N_STATE)
            self.state[[kernels.WSCALE, kernels.T]] = 1.0
            self.state[kernels.AVERAGE_SUM] = -1.0

    @classmethod
    def zeros(cls, setup):
        return cls(np.zeros(setup.n_out * setup.n_features), np.zeros(setup.n_out))

    def __getstate__(self):
        """The fields, with ``v`` and ``offsets`` as the one array they are the columns of
        (:meth:`prepare`), where they are: pickled as it is, not as two copies."""
        fields = dict(self.__dict__)
        pairs = _pairs_of(self.v, self.offsets)
        if pairs is not None:
            fields.update(v=None, offsets=None, pairs=pairs)
        return fields

    def __setstate__(self, fields):
        pairs = fields.pop("pairs", None)
        if pairs is not None:
            fields.update(v=pairs[:, 0], offsets=pairs[:, 1])
        self.__dict__.update(fields)

    def drop_agreed(self):
        """Forget the agreed model once training ends, an exchange having ended its last
        epoch: every rank's copy is that model then, and :meth:`prepare` copies it again
        for the next fit (a fitted model holds one copy of its weights less)."""
        self.agreed, self.agreed_intercept = EMPTY, EMPTY

    def arrays(self):
        """Every array and number of the state, by name (what a checkpoint holds)."""
        out = {name: getattr(self, name) for name in ARRAYS if getattr(self, name) is not None}
        if self.support is not None:
            out["support"] = self.support[: self.n_support]
        out.update({name: np.array(getattr(self, name)) for name in NUMBERS})
        return out

    @classmethod
    def from_arrays(cls, arrays):
        """The state :meth:`arrays` gave."""
        fields = {name: arrays[name] for name in ARRAYS if name in arrays}
        fields.update({name: arrays[name].item() for name in NUMBERS if name in arrays})
        weights = cls(**fields)
        if weights.residual is not None:
            weights.support = np.empty(weights.residual.size, np.int64)
            weights.support[: weights.n_support] = arrays["support"]
        return weights

    @property
    def t(self):
        return self.state[kernels.T]

    def prepare(self, setup, exchanging):
        """Make the state arrays the options need; ``exchanging``: the steps go to a copy
        of the model and the ranks exchange their changes."""
        if setup.l1 > 0 and self.l1_applied.size == 0:
            self.l1_applied = np.zeros_like(self.v)
        starting = setup.average and self.offsets.size == 0
        if starting:
            self.average_intercept = np.zeros_like(self.intercept)
        if starting or (self.offsets.size and _pairs_of(self.v, self.offsets) is None):
            # a weight and its offset side by side: the two writes of a step to a weight
            # fall in one cache line, and a step of an averaging fit reads one line less
            pairs = np.empty((self.v.size, 2))
            pairs[:, 0], pairs[:, 1] = self.v, 0.0 if starting else self.offsets
            self.v, self.offsets = pairs[:, 0], pairs[:, 1]
        if setup.learning_rate == "adaptive" and self.state[kernels.ETA] == 0:
            self.state[kernels.ETA] = setup.eta0
        if exchanging and self.agreed.size == 0:
            self.agreed = self.v.copy()
            self.agreed_intercept = self.intercept.copy()

    def coef(self):
        """The current weights, shape (n_out, n_features)."""
        return (self.state[kernels.WSCALE] * self.v).reshape(self.intercept.size, -1)

    def model(self, comm=None, *, average, agree=False):
        """The weights and intercepts the model is: :meth:`averaged` (over the ranks of
        ``comm``, and with ``agree`` as there) where ``average`` (the setup's) is set, else
        the current ones."""
        if average:
            return self.averaged(comm, agree=agree)
        return self.coef(), self.intercept

    def averaged(self, comm=None, *, agree=False):
        """The averaged weights and intercepts (the current ones before averaging began).

        With several ranks of ``comm`` (every rank calls it, between epochs, when every
        rank's copy ``v`` is the agreed model) each rank holds the sums of the average of
        its own weights: the average is the mean of the ranks' (one dense allreduce of the
        model). With ``agree``, every rank's sums become that mean, so that every rank
        then holds the same state (at the end of a fit)."""
        steps = self.state[kernels.AVERAGE_STEPS]
        if steps == 0:
            return self.coef(), self.intercept.copy()
        n, at = self.v.size, self.state[kernels.AVERAGE_SUM]
        sums = np.empty(n + self.intercept.size)  # one array of the model's size, no more
        np.multiply(self.v, at, out=sums[:n])
        sums[:n] -= self.offsets
        sums[n:] = self.average_intercept
        if comm is not None and comm.Get_size() > 1:
            collectives.allreduce(sums, comm, algorithm="dense", out=sums)
            sums /= comm.Get_size()
            if agree:
                np.multiply(self.v, at, out=self.offsets)
                self.offsets -= sums[:n]
                self.average_intercept[:] = sums[n:]
        sums /= steps
        return sums[:n].reshape(self.intercept.size, -1), sums[n:]


def _pairs_of(v, offsets):
    """The one array whose two columns ``v`` and ``offsets`` are, as a view, or None."""
    step = v.itemsize
    if not (v.size and v.size == offsets.size and v.dtype == offsets.dtype == np.float64):
        return None
    if v.strides != (2 * step,) or offsets.strides != (2 * step,):
        return None
    if offsets.ctypes.data != v.ctypes.data + step:
        return None
    return np.lib.stride_tricks.as_strided(v, (v.size, 2), (2 * step, step))


ARRAYS = (
    "v", "intercept", "state", "l1_applied", "offsets", "average_intercept", "agreed",
    "agreed_intercept", "residual", "in_support",
)  # fmt: skip
NUMBERS = ("epochs", "average_start", "period", "listing", "dense", "n_support")


@dataclass
class Epoch:
    """One epoch's record, the same on every rank but for this rank's traffic."""

    epoch: int
    loss: float  # mean loss over the epoch's rows (all ranks)
    seconds: float
    steps: int  # local steps of each rank
    rows: int
    exchanges: int = 0
    local_steps: int = 0  # steps between exchanges (0: none)
    stats: Stats = field(default_factory=Stats)
    dense_bytes: int = 0  # what a dense allreduce would have sent over the same exchanges
    step_entries: int | None = None  # nonzeros of this rank's changes (None: never formed)
    sent_entries: int | None = None  # ... of what it sent of them (fewer with TopK)
    validation_score: float | None = None
    gamma: list | None = None  # per exchange: the largest gamma over the ranks (diagnostics)
    xi: list | None = None  # per exchange: xi of the ranks' TopKs (diagnostics)
    clipped: int = 0  # slopes of the loss clipped at kernels.MAX_DLOSS (all ranks): diverging

    def as_dict(self):
        record = {k: v for k, v in self.__dict__.items() if k != "stats"}
        record.update({f"allreduce_{k}": v for k, v in self.stats.as_dict().items()})
        return record

    @classmethod
    def from_dict(cls, record):
        """The record :meth:`as_dict` gave."""
        prefix = "allreduce_"
        traffic = {k.removeprefix(prefix): v for k, v in record.items() if k.startswith(prefix)}
        fields = {k: v for k, v in record.items() if not k.startswith(prefix)}
        return cls(**fields, stats=Stats(**traffic))


@dataclass
class Progress:
    """Where a call of :func:`train` stands, besides the weights: what a checkpoint holds
    to resume it. Between epochs ``step`` is 0; within one (at an exchange, where every
    rank holds the agreed model) the epoch under way is ``weights.epochs`` and the fields
    below ``step`` say how far it went."""

    epochs: int = 0  # epochs finished in this call
    history: list = field(default_factory=list)  # their records, as Epoch.as_dict
    best: float = math.inf  # the measure an epoch must beat (loop._converge)
    no_improvement: int = 0
    done: bool = False  # it converged
    step: int = 0  # the epoch under way: the next step to take
    loss_sum: float = 0.0  # ... its summed loss so far
    clipped: float = 0.0  # ... the clipped slopes counted before it began
    seconds: float = 0.0  # ... its seconds so far
    stats: dict = field(default_factory=dict)  # ... this rank's traffic so far
    exchange: dict = field(default_factory=dict)  # ... the exchange's counts so far

    def as_dict(self):
        return {**self.__dict__, "best": None if math.isinf(self.best) else self.best}

    @classmethod
    def from_dict(cls, record):
        best = math.inf if record["best"] is None else record["best"]
        return cls(**{**record, "best": best})
