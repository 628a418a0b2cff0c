"""The training loop every rank runs in lock-step: local SGD steps and exchanges.

Each rank takes SGD steps on its own rows, ``batch_size`` rows a step: the mean of their
gradients at the learning rate of the current sample time ``t`` (steps taken so far),
after the L2 shrink of one step, ``w = wscale * v`` with ``wscale *= max(0, 1 - eta * l2)``
(a step with ``eta * l2 >= 1`` starts from zero weights); with one row a step it is
scikit-learn's per-row SGD. Every ``local_steps`` steps the ranks
average their changes to the model since they last agreed (:mod:`sparcml_apps.exchange`),
so all ranks hold the same model, bit for bit, after every exchange; an epoch ends with
one. Every rank advances ``t`` and ``wscale`` alike, whether it had rows in a step or not,
so the changes exchanged stay sparse. On a single rank without compression there is
nothing to exchange: the steps change the model directly (with L1 and averaging booked
per weight).

With several ranks, L1 is booked on the agreed model when the ranks exchange; each rank
averages its own weights (every step's, the jumps to the agreed model included), and the
ranks take the mean of their averages when the model is read. With ``diagnostics`` (and
TopK), every exchange also measures the quantities of the TopK analysis
(:mod:`sparcml_apps.diagnostics`).
"""

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

import collectives
from collectives import Stats

from . import exchange as E
from . import holdout, memory
from . import kernels as K


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
        params = np.zeros(K.N_PARAMS)
        params[K.SCHEDULE] = K.SCHEDULES[self.learning_rate]
        params[K.ETA0] = self.eta0
        params[K.POWER_T] = self.power_t
        params[K.ALPHA] = self.alpha
        if self.learning_rate == "optimal":
            # as scikit-learn: the first step at the rate a typical weight would take
            typical = math.sqrt(1.0 / math.sqrt(self.alpha))
            slope = K.loss_and_slope(K.LOSSES[self.loss], -typical, 1.0, self.loss_param)[1]
            params[K.T0] = 1.0 / (typical / max(1.0, slope) * self.alpha)
        params[K.L2] = self.l2
        params[K.L1] = self.l1
        params[K.INTERCEPT_DECAY] = self.intercept_decay
        params[K.AVERAGE_START] = 0 if self.average == "auto" else self.average
        params[K.LOSS] = K.LOSSES[self.loss]
        params[K.LOSS_PARAM] = self.loss_param
        params[K.N_FEATURES] = self.n_features
        params[K.N_OUT] = self.n_out
        params[K.MULTICLASS] = self.multiclass
        params[K.FIT_INTERCEPT] = self.fit_intercept
        return params


_NONE = np.empty(0)  # stands for a state array the options do not need


@dataclass
class Weights:
    """The model as training holds it: ``w = wscale * v``, with averaging and L1 state;
    with several ranks also the model as they last agreed on it. With averaging, ``v`` and
    ``offsets`` are the two columns of one array (:meth:`prepare`)."""

    v: np.ndarray
    intercept: np.ndarray
    state: np.ndarray = None  # the running scalars, indexed as in kernels
    epochs: int = 0
    l1_applied: np.ndarray = field(default_factory=lambda: _NONE)
    offsets: np.ndarray = field(default_factory=lambda: _NONE)  # averaging
    average_intercept: np.ndarray = field(default_factory=lambda: _NONE)
    agreed: np.ndarray = field(default_factory=lambda: _NONE)  # several ranks
    agreed_intercept: np.ndarray = field(default_factory=lambda: _NONE)
    held_best: np.ndarray = field(default_factory=lambda: _NONE)  # holdout.HeldOut.keep
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
            self.state = np.zeros(K.N_STATE)
            self.state[[K.WSCALE, K.T]] = 1.0
            self.state[K.AVERAGE_SUM] = -1.0

    @classmethod
    def zeros(cls, setup):
        return cls(np.zeros(setup.n_out * setup.n_features), np.zeros(setup.n_out))

    def arrays(self):
        """Every array and number of the state, by name (what a checkpoint holds)."""
        out = {name: getattr(self, name) for name in _ARRAYS if getattr(self, name) is not None}
        if self.support is not None:
            out["support"] = self.support[: self.n_support]
        out.update({name: np.array(getattr(self, name)) for name in _NUMBERS})
        return out

    @classmethod
    def from_arrays(cls, arrays):
        """The state :meth:`arrays` gave."""
        fields = {name: arrays[name] for name in _ARRAYS if name in arrays}
        fields.update({name: arrays[name].item() for name in _NUMBERS if name in arrays})
        weights = cls(**fields)
        if weights.residual is not None:
            weights.support = np.empty(weights.residual.size, np.int64)
            weights.support[: weights.n_support] = arrays["support"]
        return weights

    @property
    def t(self):
        return self.state[K.T]

    def prepare(self, setup, exchanging):
        """Make the state arrays the options need; ``exchanging``: the steps go to a copy
        of the model and the ranks exchange their changes."""
        if setup.l1 > 0 and self.l1_applied.size == 0:
            self.l1_applied = np.zeros_like(self.v)
        starting = setup.average and self.offsets.size == 0
        if starting:
            self.average_intercept = np.zeros_like(self.intercept)
        if starting or (self.offsets.size and not np.may_share_memory(self.v, self.offsets)):
            # a weight and its offset side by side: the two writes of a step to a weight
            # fall in one cache line, and a step of an averaging fit reads one line less
            pairs = np.empty((self.v.size, 2))
            pairs[:, 0], pairs[:, 1] = self.v, 0.0 if starting else self.offsets
            self.v, self.offsets = pairs[:, 0], pairs[:, 1]
        if setup.learning_rate == "adaptive" and self.state[K.ETA] == 0:
            self.state[K.ETA] = setup.eta0
        if exchanging and self.agreed.size == 0:
            self.agreed = self.v.copy()
            self.agreed_intercept = self.intercept.copy()

    def coef(self):
        """The current weights, shape (n_out, n_features)."""
        return (self.state[K.WSCALE] * self.v).reshape(self.intercept.size, -1)

    def averaged(self, comm=None, *, agree=False):
        """The averaged weights and intercepts (the current ones before averaging began).

        With several ranks of ``comm`` (every rank calls it, between epochs, when every
        rank's copy ``v`` is the agreed model) each rank holds the sums of the average of
        its own weights: the average is the mean of the ranks' (one dense allreduce of the
        model). With ``agree``, every rank's sums become that mean, so that every rank
        then holds the same state (at the end of a fit)."""
        steps = self.state[K.AVERAGE_STEPS]
        if steps == 0:
            return self.coef(), self.intercept.copy()
        n, at = self.v.size, self.state[K.AVERAGE_SUM]
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


_ARRAYS = (
    "v", "intercept", "state", "l1_applied", "offsets", "average_intercept", "agreed",
    "agreed_intercept", "residual", "in_support", "held_best",
)  # fmt: skip
_NUMBERS = ("epochs", "average_start", "period", "listing", "dense", "n_support")


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
    best: float = math.inf
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


def _unsigned(array):
    """The same non-negative integers, unsigned: compiled indexing then skips the test
    for negative indices (a fifth of the time of a step)."""
    return array.view(np.uint32 if array.itemsize == 4 else np.uint64)


def _writable(array):
    return array if array.flags.writeable else array.copy()


class _Epochs:
    """The steps and exchanges of epochs on every rank of ``comm`` over this rank's rows."""

    def __init__(self, X, y, row_weight, setup, weights, comm, n_rows):
        # labels and weights read-only (a memory map, Dask's buffers) would compile the
        # steps again for that type: they are small, so copy them
        self.X, self.y, self.row_weight = X, _writable(y), _writable(row_weight)
        self.indptr, self.indices = _unsigned(X.indptr), _unsigned(X.indices)
        self.setup, self.weights, self.comm = setup, weights, comm
        self.n_rows = n_rows  # the rows of X the epochs step over
        nprocs = comm.Get_size()
        self.counts = np.empty(nprocs, np.int64)
        rows = np.array([n_rows], np.int64)
        collectives.wait(comm.Iallgather(rows, self.counts), comm)
        self.steps = int(-(-self.counts.max() // setup.batch_size))
        self.params = setup.params()
        if setup.average == "auto":  # from the first fit's second epoch
            weights.average_start = weights.average_start or int(weights.t) + self.steps
            self.params[K.AVERAGE_START] = weights.average_start
        self.coefs = np.empty((setup.n_out, setup.batch_size))
        self.exchanging = nprocs > 1 or setup.compression is not None
        weights.prepare(setup, self.exchanging)
        self.exchange = None
        self.windows = self.window_steps = self.edges = None
        self.report = setup.progress if comm.Get_rank() == 0 else None  # rank 0 reports

    def run(self, order, stats, progress, pause=None):
        """The epoch over this rank's rows in ``order``, from step ``progress.step`` on
        (with ``progress.loss_sum`` the loss of the steps before); the rank's summed loss.

        ``pause(step, loss_sum)``, if given, is called wherever the epoch could be resumed
        from: every :data:`PAUSE_STEPS` steps of one rank alone; on several ranks after
        every exchange but the last (not with ``overlap``: an exchange is then in flight).
        """
        w, setup = self.weights, self.setup
        first, loss_sum = progress.step, progress.loss_sum
        if not self.exchanging:
            chunk = self.steps if pause is None else PAUSE_STEPS
            while first < self.steps:
                stop = min(first + chunk, self.steps)
                loss_sum = self._steps(order, first, stop, loss_sum)
                first = stop
                if pause is not None and first < self.steps:
                    pause(first, loss_sum)
            return loss_sum
        if w.period == 0:  # chosen once, on the first epoch's order
            w.period, w.listing, w.dense = E.plan(
                setup, self.indptr, self.indices, order, self.steps, self.comm
            )
        if self.exchange is None:
            self.exchange = E.make(setup, w, self.comm)
        self.exchange.begin_epoch(progress.exchange)
        batch = setup.batch_size
        while first < self.steps:
            stop = min(first + w.period, self.steps)
            if self.exchange.listing:
                rows = order[min(first * batch, order.size) : min(stop * batch, order.size)]
                nnz = int(self.X.indptr[rows + 1].sum() - self.X.indptr[rows].sum())
                self.exchange.reserve(nnz * setup.n_out)
            loss_sum, done = self._period(order, first, stop, loss_sum)
            self.exchange(int(np.count_nonzero(self.counts > first * batch)), stats)
            if done < stop:  # a period ends early where wscale is folded into the weights
                self.exchange.finish()
                self._renormalize()
            first = done
            if pause is not None and first < self.steps and not setup.overlap:
                pause(first, loss_sum)
        self.exchange.end_epoch()
        return loss_sum

    def _steps(self, order, first, stop, loss_sum):
        """Steps ``first`` to ``stop - 1`` of one rank alone; the epoch's summed loss so
        far (``loss_sum`` before them)."""
        while first < stop:
            loss_sum, first = self._period(order, first, stop, loss_sum)
            if first < stop:
                self._renormalize()
        return loss_sum

    def _period(self, order, first, stop, loss_sum):
        """The steps from ``first``, up to ``stop`` or where ``wscale`` must be folded into
        the weights; the epoch's summed loss so far (``loss_sum`` before them) and the step
        they stopped before. The kernel's calls break off at the epoch's ``edges``
        (:meth:`begin_epoch`): out of core, where a window begins; with a progress
        callback, every :data:`PROGRESS_STEPS` steps."""
        if self.edges is None:
            return self._kernel(order, first, stop, loss_sum)
        while True:
            self._reached(first)
            at = int(np.searchsorted(self.edges, first, "right"))
            end = min(stop, int(self.edges[at])) if at < self.edges.size else stop
            loss_sum, done = self._kernel(order, first, end, loss_sum)
            if done < end or end == stop:
                return loss_sum, done
            first = end

    def begin_epoch(self, windows=None, starts=None):
        """Where the epoch's steps break off: for ``windows`` (out of core; they start at
        positions ``starts`` of the epoch's order) and, on rank 0, to report progress
        (``setup.progress``) every :data:`PROGRESS_STEPS` steps. None: nowhere."""
        self.end_epoch()
        self.windows = windows
        edges = []
        if windows is not None:
            self.window_steps = starts // self.setup.batch_size
            edges.append(self.window_steps)
        if self.report is not None:
            edges.append(np.arange(0, self.steps, PROGRESS_STEPS))
        self.edges = np.unique(np.concatenate(edges)) if edges else None

    def end_epoch(self):
        if self.windows is not None:
            self.windows.close()
        if self.edges is not None and self.report is not None:
            self.report(self.n_rows, self.n_rows)
        self.windows = self.window_steps = self.edges = None

    def _reached(self, step):
        """The steps reach ``step``: its window is entered, the progress told."""
        if self.windows is not None:
            self.windows.enter(int(np.searchsorted(self.window_steps, step, "right")) - 1)
        if self.report is not None:
            self.report(min(step * self.setup.batch_size, self.n_rows), self.n_rows)

    def _kernel(self, order, first, stop, loss_sum):
        X, w, setup, exchange = self.X, self.weights, self.setup, self.exchange
        loss_sum, n_touched, done, zeroed = K.steps(
            self.indptr,
            self.indices,
            X.data,
            order,
            first,
            stop,
            setup.batch_size,
            self.y,
            self.row_weight,
            setup.pos_weight,
            setup.neg_weight,
            self.params,
            w.state,
            w.v,
            w.intercept,
            w.l1_applied,
            w.offsets,
            w.average_intercept,
            w.agreed,
            w.residual if w.residual is not None else _NONE,
            exchange.flags if exchange else _FLAGS,
            exchange.touched if exchange else _TOUCHED,
            exchange.n_touched if exchange else 0,
            self.coefs,
            loss_sum,
        )
        if exchange:
            exchange.n_touched = n_touched
            if zeroed:
                exchange.zero_in_flight()
        return loss_sum, done

    def _renormalize(self):
        w = self.weights
        residual = w.residual if w.residual is not None else _NONE
        K.renormalize(w.state, w.v, w.agreed, residual, w.offsets)


PAUSE_STEPS = 4096
"""One rank alone may be checkpointed within an epoch every this many steps."""
PROGRESS_STEPS = 16384
"""Rank 0 reports its progress through an epoch every this many steps."""
_FLAGS = np.empty(0, np.bool_)
_TOUCHED = np.empty(0, np.int64)


def _global_sums(comm, values):
    """Sum small float64 ``values`` over the ranks (a dense allreduce)."""
    values = np.asarray(values, np.float64)
    if comm.Get_size() == 1:  # every epoch of a small fit pays for a collective's checks
        return values
    return collectives.allreduce(values, comm, algorithm="dense")


def train(
    X, y, row_weight, setup, weights, comm, *, max_epochs, check_convergence=True,
    held=None, significance=0.0, progress=None, checkpoints=None, block_rows=0,
):  # fmt: skip
    """Run up to ``max_epochs`` epochs on every rank of ``comm``; the list of :class:`Epoch`.

    ``X`` is this rank's CSR rows, ``y`` their targets (+-1, the class index for
    multiclass, or the value), ``row_weight`` their sample weights. ``held`` marks the rows
    held out for early stopping (never stepped over; their score decides), or is None.

    Convergence is decided on global sums, the same whatever the number of ranks: with
    rows held out, on their score (accuracy or R^2) of the model the fit would return
    now (the average, once averaging began), which must rise by ``tol`` and by
    ``significance`` standard errors of its rise (:func:`holdout.rise`; 0: by ``tol``
    alone); else on the objective the steps minimize: the loss of the epoch's steps summed
    over every rank's rows, and the penalty of the model at the epoch's end once a row,
    which must fall by ``tol`` times the rows' weight (:func:`_converge`). Every rank stops
    at the same epoch. A loss or model that is no longer finite raises ``ValueError``.

    ``progress`` (a :class:`Progress` from a checkpoint, with the ``weights`` saved beside
    it) resumes a run where it was saved; the epochs it had finished count towards
    ``max_epochs``. ``checkpoints``, if given, saves the state through
    ``checkpoints.save(weights, progress, comm)`` after every epoch, and within one
    wherever ``checkpoints.due(comm)`` says so and the epoch can be resumed from.
    ``block_rows`` (not 0): this rank's epochs go out of core, a window of blocks of that
    many rows at a time (:func:`sparcml_apps.memory.epoch_order`).
    """
    rank = comm.Get_rank()
    validation = None
    if held is not None:
        validation = holdout.HeldOut(X[held], y[held], row_weight[held], setup, comm)
        if progress is None:  # (a run resumed keeps the best model's scores it saved)
            weights.held_best = _NONE
        row_weight = np.where(held, 0.0, row_weight)  # the loss sums the training rows only
    n_rows = X.shape[0] - (0 if held is None else int(np.count_nonzero(held)))
    epochs = _Epochs(X, y, row_weight, setup, weights, comm, n_rows)
    progress = progress if progress is not None else Progress()
    history = [Epoch.from_dict(record) for record in progress.history]
    while progress.epochs < max_epochs and not progress.done:
        begin = time.perf_counter() - progress.seconds
        if progress.step == 0:  # a new epoch (else one resumed midway)
            weights.epochs += 1
            progress.clipped = float(weights.state[K.CLIPPED])
        stats = Stats(**progress.stats)
        if setup.shuffle:
            generator = np.random.default_rng([setup.seed, rank, weights.epochs])
            order, starts, blocks = memory.epoch_order(generator, X.shape[0], block_rows)
        else:
            order, starts, blocks = np.arange(X.shape[0]), None, None
        if held is not None:  # the held rows leave the order, the windows where they were
            kept = ~held[order]
            if starts is not None:
                starts = np.concatenate([[0], np.cumsum(kept)])[starts]
            order = order[kept]
        windows = None if blocks is None else memory.Windows(X, block_rows, blocks)
        epochs.begin_epoch(windows, starts)
        pause = None
        if checkpoints is not None:
            pause = _pause(checkpoints, weights, progress, epochs, stats, begin, comm)
        try:
            loss_sum = epochs.run(order, stats, progress, pause)
        finally:
            epochs.end_epoch()
        progress.step, progress.loss_sum, progress.stats, progress.exchange = 0, 0.0, {}, {}
        progress.seconds = 0.0
        if setup.l1 > 0 and weights.agreed.size:  # the agreed model, then the copy
            K.apply_l1_everywhere(
                epochs.params, weights.state, weights.agreed, weights.l1_applied, _NONE
            )
            K.adopt(weights.v, weights.agreed, weights.offsets, weights.state)
        elif setup.l1 > 0:
            K.apply_l1_everywhere(
                epochs.params, weights.state, weights.v, weights.l1_applied, weights.offsets
            )
        sums = [loss_sum, float(row_weight.sum()), weights.state[K.CLIPPED] - progress.clipped]
        if validation is not None:
            sums += validation.sums(weights)
        sums = _global_sums(comm, sums)
        exchange = epochs.exchange
        record = Epoch(
            epoch=weights.epochs,
            loss=float(sums[0] / max(sums[1], 1e-300)),
            seconds=time.perf_counter() - begin,
            steps=epochs.steps,
            rows=int(epochs.counts.sum()),
            exchanges=exchange.calls if exchange else 0,
            local_steps=weights.period,
            stats=stats,
            dense_bytes=exchange.dense_bytes if exchange else 0,
            validation_score=(holdout.score(sums[3:], setup) if validation is not None else None),
            step_entries=exchange.change_entries if exchange else None,
            sent_entries=exchange.sent_entries if exchange else None,
            gamma=exchange.gamma if exchange and setup.diagnostics else None,
            xi=exchange.xi if exchange and setup.diagnostics else None,
            clipped=int(sums[2]),
        )
        history.append(record)
        _check_finite(record, weights, setup)
        if setup.verbose and rank == 0:
            print(_describe(record), flush=True)
        if setup.callback is not None:
            setup.callback(record, weights)
        if check_convergence and setup.tol is not None:
            gain = None
            if validation is not None:
                gain = _significant_gain(sums[3:], record, progress, setup, significance)
                if record.validation_score > -progress.best:
                    validation.keep(weights)
            rows = int(epochs.counts.sum())
            _converge(progress, record, sums, weights, setup, gain, rows)
        progress.epochs += 1
        progress.history.append(record.as_dict())
        if checkpoints is not None:
            checkpoints.save(weights, progress, comm)
    return history


def _pause(checkpoints, weights, progress, epochs, stats, begin, comm):
    """What the epoch under way calls where it could be resumed from: save a checkpoint
    of it there when one is due."""

    def pause(step, loss_sum):
        if checkpoints.due(comm):
            exchange = epochs.exchange.counts() if epochs.exchange else {}
            midway = replace(
                progress, step=step, loss_sum=loss_sum, stats=stats.as_dict(),
                seconds=time.perf_counter() - begin, exchange=exchange,
            )  # fmt: skip
            checkpoints.save(weights, midway, comm)

    return pause


def _significant_gain(sums, record, progress, setup, significance):
    """Whether the held-out score rose over the best so far by ``tol`` and by more than
    ``significance`` standard errors of the rise (:func:`holdout.rise`)."""
    if record.validation_score < -progress.best + setup.tol:
        return False
    if significance == 0 or math.isinf(progress.best):  # (the first score: no best yet)
        return True
    gain, error = holdout.rise(sums, setup)
    return gain > significance * error


def _converge(progress, record, sums, weights, setup, gain, rows):
    """Count the epoch towards convergence; ``progress.done`` once the run has converged.

    ``gain``: whether the held-out score rose enough (:func:`_significant_gain`), or None
    when no rows are held out: then the measure is the objective the steps minimize over
    the epoch's ``rows`` (all ranks): their summed loss, weighted, and ``rows`` times the
    penalty of the model at the epoch's end, which must fall by ``tol`` times the rows'
    weight."""
    if gain is not None:
        improved, measure = gain, -record.validation_score
    else:
        measure = float(sums[0]) + rows * _penalty(weights, setup)
        improved = measure <= progress.best - setup.tol * sums[1]
    progress.no_improvement = 0 if improved else progress.no_improvement + 1
    if record.clipped:  # steps that diverge have not converged, whatever the loss does
        progress.no_improvement = 0
    progress.best = min(progress.best, measure)
    if progress.no_improvement >= setup.n_iter_no_change:
        if setup.learning_rate == "adaptive" and weights.state[K.ETA] > 1e-6:
            weights.state[K.ETA] /= 5.0
            progress.no_improvement = 0
        else:
            progress.done = True


def _penalty(weights, setup):
    """The penalty of the current weights ``w``: ``l2 / 2 * ||w||^2 + l1 * ||w||_1`` (every
    rank holds the same weights after an epoch)."""
    if setup.l2 == 0 and setup.l1 == 0:
        return 0.0
    scale = weights.state[K.WSCALE]
    penalty = 0.5 * setup.l2 * scale * scale * float(np.dot(weights.v, weights.v))
    if setup.l1 > 0:
        penalty += setup.l1 * abs(scale) * float(np.abs(weights.v).sum())
    return penalty


def _check_finite(record, weights, setup):
    """Raise, on every rank alike, when training has overflowed (as scikit-learn does)."""
    finite = math.isfinite(record.loss) and math.isfinite(weights.state[K.WSCALE])
    finite = finite and bool(np.isfinite(weights.intercept).all())
    if finite:  # the weights: every rank holds the same after an epoch
        finite = bool(np.isfinite(weights.v.max()) and np.isfinite(weights.v.min()))
    if not finite:
        raise ValueError(
            f"Floating-point under-/overflow occurred at epoch #{record.epoch}: the loss or "
            f"the weights are no longer finite (mean loss {record.loss!r}). Scaling input "
            "data with StandardScaler or MinMaxScaler might help (MaxAbsScaler keeps sparse "
            f"rows sparse), as might {_smaller_steps(setup)}."
        )


def _smaller_steps(setup):
    """What makes the steps of ``setup`` smaller, in words."""
    if setup.learning_rate == "optimal":  # eta0 plays no part
        return f"a larger alpha (currently {setup.alpha!r}; the rate is 1 / (alpha * (t0 + t)))"
    hint = f"a smaller eta0 (currently {setup.eta0!r} with learning_rate={setup.learning_rate!r})"
    if setup.learning_rate == "invscaling" and setup.power_t < 0:
        hint += f" or power_t >= 0 (currently {setup.power_t!r}: the rate grows)"
    return hint


def _describe(record):
    stats = record.stats
    line = (
        f"-- Epoch {record.epoch}: loss {record.loss:.6f}, {record.seconds:.2f} s, "
        f"sent {stats.bytes_sent / 1e6:.2f} MB in {stats.seconds:.2f} s "
        f"(a dense allreduce: {record.dense_bytes / 1e6:.2f} MB)"
    )
    if record.validation_score is not None:
        line += f", validation score {record.validation_score:.5f}"
    if record.gamma:
        line += f", largest gamma {max(record.gamma):.4f}, largest xi {max(record.xi):.4f}"
    return line
