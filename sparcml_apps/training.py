"""The training loop every rank runs in lock-step: mini-batch SGD over sparse allreduce.

Every step, each rank turns its next ``batch_size`` rows into the sparse vector
``eta * gradient`` (columns of the batch only; flat index ``class * n_features + feature``,
then one entry per intercept), optionally keeps back all but its TopK entries (error
feedback), and the ranks sum their vectors with :func:`collectives.allreduce`. Every rank
then applies the same sum to the same weights, so all ranks hold the same model bit for bit.
With ``overlap``, the sum of a step travels (:func:`collectives.iallreduce`) while the
ranks compute the next step's gradient, which therefore sees the weights without the
step before it (a delay of one step); an epoch ends with every step applied.
On a single rank without compression the sum is the rank's own step, so each row's update
goes to the weights directly (one compiled loop per epoch), with the same arithmetic.
With ``diagnostics`` (and TopK), every step also measures the quantities of the TopK
analysis (:mod:`sparcml_apps.diagnostics`): the largest ``gamma`` over the ranks and ``xi``,
at the cost of one more exact allreduce a step; the model stays the same bit for bit.

A step over ``G`` rows (all ranks together) applies the sum of their gradients times the
learning rate at sample time ``t`` (rows seen so far), and shrinks the weights by the L2
factor of ``G`` per-row steps: with one row and one rank it is plain per-row SGD. The
``optimal`` schedule's offset ``t0`` is multiplied by the rows of a full step, so that the
first steps are no larger than one per-row step however large the batch.
"""

import math
import time
from dataclasses import dataclass, field

import numpy as np

import collectives
from collectives import SparseVector, Stats

from . import diagnostics as D
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
    loss_param: float = 0.1  # epsilon of huber and epsilon_insensitive
    shuffle: bool = True
    seed: int = 0
    tol: float | None = 1e-3
    n_iter_no_change: int = 5
    average: int = 0  # 0: no averaging; n: average from sample time n on
    compression: str | None = None
    topk: float = 0.01  # fraction of the coordinates (float) or a count (int)
    error_feedback: bool = True
    diagnostics: bool = False  # record TopK's gamma and xi every step
    algorithm: str = "auto"
    quantization_bits: int | None = None
    overlap: bool = False
    intercept_decay: float = 1.0
    verbose: int = 0
    classifier: bool = True
    callback: object = None

    @property
    def size(self):
        """Length of the vectors sent: every weight, then the intercepts."""
        return self.n_out * self.n_features + self.n_out

    def k(self):
        """The number of weights TopK keeps a step (the intercepts always travel)."""
        n_weights = self.n_out * self.n_features
        if isinstance(self.topk, (int, np.integer)):
            return min(int(self.topk), n_weights)
        return max(1, int(round(self.topk * n_weights)))

    def params(self, full_step_rows):
        """The options as the kernels read them."""
        params = np.zeros(K.N_PARAMS)
        params[K.SCHEDULE] = K.SCHEDULES[self.learning_rate]
        params[K.ETA0] = self.eta0
        params[K.POWER_T] = self.power_t
        params[K.ALPHA] = self.alpha
        if self.learning_rate == "optimal":
            typical = math.sqrt(1.0 / math.sqrt(self.alpha))
            slope = abs(K.loss_and_slope(K.LOSSES[self.loss], -typical, 1.0, self.loss_param)[1])
            params[K.T0] = full_step_rows / (typical / max(1.0, slope) * self.alpha)
        params[K.L2] = self.l2
        params[K.L1] = self.l1
        params[K.INTERCEPT_DECAY] = self.intercept_decay
        params[K.AVERAGE_START] = self.average
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
    """The model as training holds it: ``w = wscale * v``, with averaging and L1 state."""

    v: np.ndarray
    intercept: np.ndarray
    state: np.ndarray = None  # the running scalars, indexed as in kernels
    epochs: int = 0
    l1_applied: np.ndarray = field(default_factory=lambda: _NONE)
    offsets: np.ndarray = field(default_factory=lambda: _NONE)  # averaging
    base: np.ndarray = field(default_factory=lambda: _NONE)
    average_intercept: np.ndarray = field(default_factory=lambda: _NONE)
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

    @property
    def t(self):
        return self.state[K.T]

    def prepare(self, setup):
        """Make the state arrays the options need."""
        if setup.l1 > 0 and self.l1_applied.size == 0:
            self.l1_applied = np.zeros_like(self.v)
        if setup.average and self.offsets.size == 0:
            self.offsets = np.zeros_like(self.v)
            self.base = np.zeros_like(self.v)
            self.average_intercept = np.zeros_like(self.intercept)
        if setup.learning_rate == "adaptive" and self.state[K.ETA] == 0:
            self.state[K.ETA] = setup.eta0

    def coef(self):
        """The current weights, shape (n_out, n_features)."""
        return (self.state[K.WSCALE] * self.v).reshape(self.intercept.size, -1)

    def averaged(self):
        """The averaged weights and intercepts (the current ones before averaging began)."""
        steps = self.state[K.AVERAGE_STEPS]
        if steps == 0:
            return self.coef(), self.intercept.copy()
        total = self.base + self.state[K.AVERAGE_SUM] * self.v - self.offsets
        return total.reshape(self.intercept.size, -1) / steps, self.average_intercept / steps


@dataclass
class Epoch:
    """One epoch's record, the same on every rank but for this rank's traffic."""

    epoch: int
    loss: float  # mean loss over the epoch's rows (all ranks)
    seconds: float
    steps: int
    rows: int
    stats: Stats = field(default_factory=Stats)
    dense_bytes: int = 0  # what a dense allreduce would have sent over the same steps
    step_entries: int | None = None  # nonzeros of this rank's steps (None: never formed)
    sent_entries: int | None = None  # ... of what it sent of them (fewer with TopK)
    validation_score: float | None = None
    gamma: list | None = None  # per step: the largest gamma over the ranks (diagnostics)
    xi: list | None = None  # per step: xi of the ranks' TopKs (diagnostics)

    def as_dict(self):
        record = {k: v for k, v in self.__dict__.items() if k != "stats"}
        record.update({f"allreduce_{k}": v for k, v in self.stats.as_dict().items()})
        return record


class _Buffers:
    """Scratch arrays of the batch kernel, sized for the largest batch of this data."""

    def __init__(self, X, setup):
        row_nnz = np.diff(X.indptr)
        largest = int(np.sort(row_nnz)[::-1][: setup.batch_size].sum()) if row_nnz.size else 0
        self.slot = np.full(setup.n_features, -1, np.int32)
        self.cols = np.empty(largest, np.int64)
        self.acc = np.empty(largest * setup.n_out)
        self.out_idx = np.empty(largest * setup.n_out + setup.n_out, np.int64)
        self.out_val = np.empty(largest * setup.n_out + setup.n_out)


def _accumulated(vec, split, weights):
    """The vector TopK is taken from, in float64: the residual before the step plus the
    step's ``split`` weight entries (not the intercepts)."""
    step_idx = vec.indices[:split].astype(np.int64)
    if weights.n_support == 0:
        return SparseVector(step_idx, vec.values[:split].astype(np.float64), vec.size, check=False)
    indices = np.union1d(weights.support[: weights.n_support], step_idx)
    values = weights.residual[indices]
    values[np.searchsorted(indices, step_idx)] += vec.values[:split]
    return SparseVector(indices, values, vec.size, check=False)


def _compress(vec, setup, weights):
    """TopK of (residual + vec) over the weights; the residual keeps the rest (with error
    feedback). The few intercept entries always travel. Returns what to send and, with
    diagnostics, the float64 vector TopK was taken from (else None)."""
    n_weights = setup.n_out * setup.n_features
    if weights.residual is None:
        weights.residual = np.zeros(n_weights)
        weights.in_support = np.zeros(n_weights, np.bool_)
        weights.support = np.empty(n_weights, np.int64)
        weights.n_support = 0
    split = np.searchsorted(vec.indices, n_weights)
    accumulated = _accumulated(vec, split, weights) if setup.diagnostics else None
    k = setup.k()
    out_idx = np.empty(k + vec.nnz - split, np.int64)
    out_val = np.empty(k + vec.nnz - split)
    taken, weights.n_support = K.topk(
        vec.indices[:split],
        vec.values[:split],
        k,
        weights.residual,
        weights.in_support,
        weights.support,
        weights.n_support,
        setup.error_feedback,
        out_idx,
        out_val,
    )
    end = taken + vec.nnz - split
    out_idx[taken:end] = vec.indices[split:]
    out_val[taken:end] = vec.values[split:]
    sent = SparseVector(
        out_idx[:end].astype(vec.indices.dtype),
        out_val[:end].astype(vec.values.dtype),
        vec.size,
        check=False,
    )
    return sent, accumulated


def _diagnose(accumulated, sent, setup, comm):
    """``(gamma, xi)`` of one step, the same on every rank of ``comm``: the largest of the
    ranks' ``||acc_p - sent_p|| / ||acc_p||``, and ``xi`` of their sums (one exact allreduce
    of ``[acc_p | sent_p]``, not counted in the step's traffic, and one of the largest)."""
    from mpi4py import MPI

    n_weights = setup.n_out * setup.n_features
    taken = np.searchsorted(sent.indices, n_weights)  # the intercepts come last
    sent = SparseVector(
        sent.indices[:taken], sent.values[:taken].astype(np.float64), n_weights, check=False
    )
    accumulated = SparseVector(accumulated.indices, accumulated.values, n_weights, check=False)
    total = D.norm(accumulated)
    mine = D.difference_norm(accumulated, sent) / total if total > 0 else 0.0
    index_dtype = np.uint32 if 2 * n_weights < 2**32 else np.uint64
    indices = np.concatenate([accumulated.indices, sent.indices.astype(np.int64) + n_weights])
    both = SparseVector(
        indices.astype(index_dtype),
        np.concatenate([accumulated.values, sent.values]),
        2 * n_weights,
        check=False,
    )
    sums = collectives.allreduce(both, comm, out="sparse")
    cut = np.searchsorted(sums.indices, n_weights)
    sum_accumulated = SparseVector(sums.indices[:cut], sums.values[:cut], n_weights, check=False)
    sum_sent = SparseVector(
        sums.indices[cut:] - sums.indices.dtype.type(n_weights),
        sums.values[cut:],
        n_weights,
        check=False,
    )
    largest = np.empty(1)
    comm.Allreduce(np.array([mine]), largest, op=MPI.MAX)
    return float(largest[0]), D.xi(sum_sent, sum_accumulated, setup.k())


def _unsigned(array):
    """The same non-negative integers, unsigned: compiled indexing then skips the test
    for negative indices (a fifth of the time of a step)."""
    return array.view(np.uint32 if array.itemsize == 4 else np.uint64)


class _Epochs:
    """The steps of epochs on every rank of ``comm`` over this rank's rows."""

    def __init__(self, X, y, row_weight, setup, weights, comm):
        self.X, self.y, self.row_weight = X, y, row_weight
        self.indptr, self.indices = _unsigned(X.indptr), _unsigned(X.indices)
        self.setup, self.weights, self.comm = setup, weights, comm
        nprocs = comm.Get_size()
        self.counts = np.empty(nprocs, np.int64)
        comm.Allgather(np.array([X.shape[0]], np.int64), self.counts)
        self.steps = int(-(-self.counts.max() // setup.batch_size))
        self.params = setup.params(setup.batch_size * nprocs)
        self.local = nprocs == 1 and setup.compression is None and not setup.overlap
        self.pending = None  # with overlap: the last step's sum in flight, its rate and rows
        self.buffers = None if self.local else _Buffers(X, setup)
        self.index_dtype = np.uint32 if setup.size < 2**32 else np.uint64
        self.diagnose = setup.diagnostics and setup.compression == "topk"
        self.gamma, self.xi = [], []  # per step of the epoch, with diagnostics

    def run(self, order, stats):
        """One epoch over this rank's rows in ``order``; the rank's summed loss."""
        X, w = self.X, self.weights
        if self.local:
            return K.local_epoch(
                self.indptr,
                self.indices,
                X.data,
                order,
                self.setup.batch_size,
                self.y,
                self.row_weight,
                self.setup.pos_weight,
                self.setup.neg_weight,
                self.params,
                w.state,
                w.v,
                w.intercept,
                w.l1_applied,
                w.offsets,
                w.base,
                w.average_intercept,
            )
        batch = self.setup.batch_size
        loss_sum = 0.0
        self.step_entries = self.sent_entries = 0
        self.gamma, self.xi = [], []
        for step in range(self.steps):
            rows = order[step * batch : (step + 1) * batch]
            rows_in_step = int(np.clip(self.counts - step * batch, 0, batch).sum())
            loss_sum += self.step(step, rows, rows_in_step, stats)
        self.settle()
        return loss_sum

    def step(self, step, rows, rows_in_step, stats):
        """One lock-step SGD step over ``rows``; this rank's summed loss over them."""
        X, w, b, setup = self.X, self.weights, self.buffers, self.setup
        n, loss_sum, eta = K.batch_gradient(
            self.indptr,
            self.indices,
            X.data,
            rows,
            self.y,
            self.row_weight,
            setup.pos_weight,
            setup.neg_weight,
            self.params,
            w.state,
            w.v,
            w.intercept,
            b.slot,
            b.cols,
            b.acc,
            b.out_idx,
            b.out_val,
        )
        vec = SparseVector(
            b.out_idx[:n].astype(self.index_dtype),
            b.out_val[:n].astype(setup.value_dtype),
            setup.size,
            check=False,
        )
        self.step_entries += vec.nnz
        if setup.compression == "topk":
            vec, accumulated = _compress(vec, setup, w)
            if accumulated is not None:
                gamma, xi = _diagnose(accumulated, vec, setup, self.comm)
                self.gamma.append(gamma)
                self.xi.append(xi)
        self.sent_entries += vec.nnz
        options = dict(algorithm=setup.algorithm, stats=stats)
        if setup.quantization_bits:
            # the same on every rank, new every step: (seed, epoch, step)
            options["quantization_bits"] = setup.quantization_bits
            options["random_state"] = (setup.seed << 64) | (w.epochs << 32) | step
        if setup.overlap:
            self.settle()
            self.pending = collectives.iallreduce(vec, self.comm, **options), eta, rows_in_step
        else:
            self.apply(collectives.allreduce(vec, self.comm, **options), eta, rows_in_step)
        return loss_sum

    def settle(self):
        """Wait for the sum in flight, if any, and apply it."""
        if self.pending is not None:
            request, eta, rows_in_step = self.pending
            self.pending = None
            self.apply(request.wait(), eta, rows_in_step)

    def apply(self, total, eta, rows_in_step):
        """Apply the summed step ``total`` taken at rate ``eta`` over ``rows_in_step`` rows."""
        w = self.weights
        if isinstance(total, np.ndarray):
            total = SparseVector.from_dense(total)
        K.take_step(
            total.indices,
            total.values,
            eta,
            rows_in_step,
            self.params,
            w.state,
            w.v,
            w.intercept,
            w.l1_applied,
            w.offsets,
            w.base,
            w.average_intercept,
        )


def _global_sums(comm, values):
    """Sum small float64 ``values`` over the ranks (a dense allreduce)."""
    return collectives.allreduce(np.asarray(values, np.float64), comm, algorithm="dense")


def train(
    X, y, row_weight, setup, weights, comm, *, max_epochs, check_convergence=True, validation=None
):
    """Run up to ``max_epochs`` epochs on every rank of ``comm``; the list of :class:`Epoch`.

    ``X`` is this rank's CSR rows, ``y`` their targets (+-1, the class index for
    multiclass, or the value), ``row_weight`` their sample weights. ``validation`` is this
    rank's held-out ``(X, y, weight)`` for early stopping, or None. Convergence (``tol``,
    ``n_iter_no_change``, early stopping) is decided on global sums, so every rank stops
    at the same epoch.
    """
    nprocs, rank = comm.Get_size(), comm.Get_rank()
    weights.prepare(setup)
    epochs = _Epochs(X, y, row_weight, setup, weights, comm)
    history = []
    best = np.inf
    no_improvement = 0
    for _ in range(max_epochs):
        begin = time.perf_counter()
        weights.epochs += 1
        stats = Stats()
        if setup.shuffle:
            generator = np.random.default_rng([setup.seed, rank, weights.epochs])
            order = generator.permutation(X.shape[0])
        else:
            order = np.arange(X.shape[0])
        loss_sum = epochs.run(order, stats)
        if setup.l1 > 0:
            K.apply_l1_everywhere(
                epochs.params, weights.state, weights.v, weights.l1_applied, weights.offsets
            )
        sums = [loss_sum, float(row_weight.sum())]
        if validation is not None:
            sums += validation_sums(validation, weights, setup)
        sums = _global_sums(comm, sums)
        record = Epoch(
            epoch=weights.epochs,
            loss=sums[0] / max(sums[1], 1e-300),
            seconds=time.perf_counter() - begin,
            steps=epochs.steps,
            rows=int(epochs.counts.sum()),
            stats=stats,
            dense_bytes=epochs.steps
            * 2
            * (nprocs - 1)
            * setup.size
            * setup.value_dtype.itemsize
            // nprocs,
            validation_score=(
                validation_score(sums[2:], setup) if validation is not None else None
            ),
            step_entries=None if epochs.local else epochs.step_entries,
            sent_entries=None if epochs.local else epochs.sent_entries,
            gamma=epochs.gamma if epochs.diagnose else None,
            xi=epochs.xi if epochs.diagnose else None,
        )
        history.append(record)
        if setup.verbose and rank == 0:
            print(_describe(record), flush=True)
        if setup.callback is not None:
            setup.callback(record, weights)
        if not check_convergence or setup.tol is None:
            continue
        if validation is not None:
            measure, tolerance = -record.validation_score, setup.tol
        else:
            measure, tolerance = sums[0], setup.tol * sums[1]
        no_improvement = no_improvement + 1 if measure > best - tolerance else 0
        best = min(best, measure)
        if no_improvement >= setup.n_iter_no_change:
            if setup.learning_rate == "adaptive" and weights.state[K.ETA] > 1e-6:
                weights.state[K.ETA] /= 5.0
                no_improvement = 0
            else:
                break
    return history


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


def validation_sums(validation, weights, setup):
    """This rank's sums for the validation score: [weighted correct, weight] for a
    classifier; [weighted squared error, weight, weighted y, weighted y^2] for a regressor."""
    X, y, weight = validation
    scores = np.asarray(X @ weights.coef().T) + weights.intercept
    if setup.classifier:
        if setup.multiclass:
            correct = scores.argmax(axis=1) == y
        else:
            correct = np.where(scores[:, 0] > 0, 1.0, -1.0) == y
        return [float(weight @ correct), float(weight.sum())]
    error = scores[:, 0] - y
    return [float(weight @ error**2), float(weight.sum()), float(weight @ y), float(weight @ y**2)]


def validation_score(sums, setup):
    """Accuracy, or R^2, from the global validation sums."""
    if setup.classifier:
        return sums[0] / max(sums[1], 1e-300)
    squared_error, total, first, second = sums
    spread = second - first * first / max(total, 1e-300)
    return 1.0 - squared_error / spread if spread > 0 else 0.0
