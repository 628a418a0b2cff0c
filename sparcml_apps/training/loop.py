"""The training loop every rank runs in lock-step: local SGD steps and exchanges.

Each rank takes SGD steps on its own rows, ``batch_size`` rows a step: the mean of their
gradients at the learning rate of the current sample time ``t`` (steps taken so far),
after the L2 shrink of one step, ``w = wscale * v`` with ``wscale *= max(0, 1 - eta * l2)``
(a step with ``eta * l2 >= 1`` starts from zero weights); with one row a step it is
scikit-learn's per-row SGD. Every ``local_steps`` steps the ranks
average their changes to the model since they last agreed (:mod:`sparcml_apps.training.exchange`),
so all ranks hold the same model, bit for bit, after every exchange; an epoch ends with
one. Every rank advances ``t`` and ``wscale`` alike, whether it had rows in a step or not,
so the changes exchanged stay sparse. On a single rank without compression there is
nothing to exchange: the steps change the model directly (with L1 and averaging booked
per weight).

With several ranks, L1 is booked on the agreed model when the ranks exchange; each rank
averages its own weights (every step's, the jumps to the agreed model included), and the
ranks take the mean of their averages when the model is read. With ``diagnostics`` (and
TopK), every exchange also measures the quantities of the TopK analysis
(:mod:`sparcml_apps.training.diagnostics`).
"""

import math
import time
from dataclasses import replace

import numpy as np

import collectives

from . import exchange, exchange_kernels, holdout, kernels, memory
from .state import EMPTY, Epoch, Progress


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
            self.params[kernels.AVERAGE_START] = weights.average_start
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
            w.period, w.listing, w.dense = exchange.plan(
                setup, self.indptr, self.indices, order, self.steps, self.comm
            )
        if self.exchange is None:
            self.exchange = exchange.make(setup, w, self.comm)
        period = w.period
        if setup.local_steps == "auto":
            period = exchange.epoch_period(w.period, self.steps, w.epochs, self.params)
        self.exchange.begin_epoch(period, progress.exchange)
        batch = setup.batch_size
        while first < self.steps:
            stop = min(first + period, self.steps)
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
        X, w, setup, strategy = self.X, self.weights, self.setup, self.exchange
        loss_sum, n_touched, done, zeroed = kernels.steps(
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
            w.residual if w.residual is not None else EMPTY,
            strategy.flags if strategy else _FLAGS,
            strategy.touched if strategy else _TOUCHED,
            strategy.n_touched if strategy else 0,
            self.coefs,
            loss_sum,
        )
        if strategy:
            strategy.n_touched = n_touched
            if zeroed:
                strategy.zero_in_flight()
        return loss_sum, done

    def _renormalize(self):
        w = self.weights
        residual = w.residual if w.residual is not None else EMPTY
        kernels.renormalize(w.state, w.v, w.agreed, residual, w.offsets)


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
    ``significance`` standard errors of the difference of two scores of the held-out rows
    (:func:`holdout.noise`) over the score of the last epoch that rose so (0: by ``tol``
    alone, over the best score so far); else on
    the objective the steps minimize: the loss of the epoch's steps summed over every
    rank's rows, and the penalty of the model at the epoch's end once a row, which must
    fall by ``tol`` times the rows' weight (:func:`_converge`). Every rank stops at the
    same epoch. A loss or model that is no longer finite raises ``ValueError``.

    ``progress`` (a :class:`Progress` from a checkpoint, with the ``weights`` saved beside
    it) resumes a run where it was saved; the epochs it had finished count towards
    ``max_epochs``. ``checkpoints``, if given, saves the state through
    ``checkpoints.save(weights, progress, comm)`` after every epoch, and within one
    wherever ``checkpoints.due(comm)`` says so and the epoch can be resumed from.
    ``block_rows`` (not 0): this rank's epochs go out of core, a window of blocks of that
    many rows at a time (:func:`.memory.epoch_order`).
    """
    rank = comm.Get_rank()
    validation = None
    if held is not None:
        validation = holdout.HeldOut(X[held], y[held], row_weight[held], setup, comm)
        row_weight = np.where(held, 0.0, row_weight)  # the loss sums the training rows only
    n_rows = X.shape[0] - (0 if held is None else int(np.count_nonzero(held)))
    epochs = _Epochs(X, y, row_weight, setup, weights, comm, n_rows)
    progress = progress if progress is not None else Progress()
    history = [Epoch.from_dict(record) for record in progress.history]
    while progress.epochs < max_epochs and not progress.done:
        begin = time.perf_counter() - progress.seconds
        if progress.step == 0:  # a new epoch (else one resumed midway)
            weights.epochs += 1
            progress.clipped = float(weights.state[kernels.CLIPPED])
        stats = collectives.Stats(**progress.stats)
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
            exchange_kernels.apply_l1_everywhere(
                epochs.params, weights.state, weights.agreed, weights.l1_applied, EMPTY
            )
            exchange_kernels.adopt(weights.v, weights.agreed, weights.offsets, weights.state)
        elif setup.l1 > 0:
            exchange_kernels.apply_l1_everywhere(
                epochs.params, weights.state, weights.v, weights.l1_applied, weights.offsets
            )
        sums = [
            loss_sum,
            float(row_weight.sum()),
            weights.state[kernels.CLIPPED] - progress.clipped,
        ]
        if validation is not None:
            sums += validation.sums(weights)
        sums = _global_sums(comm, sums)
        strategy = epochs.exchange
        record = Epoch(
            epoch=weights.epochs,
            loss=float(sums[0] / max(sums[1], 1e-300)),
            seconds=time.perf_counter() - begin,
            steps=epochs.steps,
            rows=int(epochs.counts.sum()),
            exchanges=strategy.calls if strategy else 0,
            local_steps=strategy.period if strategy else 0,
            stats=stats,
            dense_bytes=strategy.dense_bytes if strategy else 0,
            validation_score=(holdout.score(sums[3:], setup) if validation is not None else None),
            step_entries=strategy.change_entries if strategy else None,
            sent_entries=strategy.sent_entries if strategy else None,
            gamma=strategy.gamma if strategy and setup.diagnostics else None,
            xi=strategy.xi if strategy and setup.diagnostics else None,
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
            rows = int(epochs.counts.sum())
            anchored = gain is not None and significance > 0
            _converge(progress, record, sums, weights, setup, gain, rows, anchored)
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
            counts = epochs.exchange.counts() if epochs.exchange else {}
            midway = replace(
                progress, step=step, loss_sum=loss_sum, stats=stats.as_dict(),
                seconds=time.perf_counter() - begin, exchange=counts,
            )  # fmt: skip
            checkpoints.save(weights, midway, comm)

    return pause


def _significant_gain(sums, record, progress, setup, significance):
    """Whether the held-out score rose over the reference's (:func:`_converge`) by ``tol``
    and by more than ``significance`` standard errors of the difference of two scores of
    the held-out rows (:func:`holdout.noise`)."""
    if record.validation_score < -progress.best + setup.tol:
        return False
    if significance == 0 or math.isinf(progress.best):  # (the first score: no best yet)
        return True
    rise = record.validation_score + progress.best
    return rise > significance * holdout.noise(sums, setup)


def _converge(progress, record, sums, weights, setup, gain, rows, anchored=False):
    """Count the epoch towards convergence; ``progress.done`` once the run has converged.

    ``gain``: whether the held-out score rose enough (:func:`_significant_gain`), or None
    when no rows are held out: then the measure is the objective the steps minimize over
    the epoch's ``rows`` (all ranks): their summed loss, weighted, and ``rows`` times the
    penalty of the model at the epoch's end, which must fall by ``tol`` times the rows'
    weight. Each epoch is measured against the best so far (``progress.best``), or, when
    ``anchored``, against the last epoch that gained: rises too small to count alone then
    add up until they count."""
    if gain is not None:
        improved, measure = gain, -record.validation_score
    else:
        measure = float(sums[0]) + rows * _penalty(weights, setup)
        improved = measure <= progress.best - setup.tol * sums[1]
    progress.no_improvement = 0 if improved else progress.no_improvement + 1
    if record.clipped:  # steps that diverge have not converged, whatever the loss does
        progress.no_improvement = 0
    if improved or not anchored:
        progress.best = min(progress.best, measure)
    if progress.no_improvement >= setup.n_iter_no_change:
        if setup.learning_rate == "adaptive" and weights.state[kernels.ETA] > 1e-6:
            weights.state[kernels.ETA] /= 5.0
            progress.no_improvement = 0
        else:
            progress.done = True


def _penalty(weights, setup):
    """The penalty of the current weights ``w``: ``l2 / 2 * ||w||^2 + l1 * ||w||_1`` (every
    rank holds the same weights after an epoch)."""
    if setup.l2 == 0 and setup.l1 == 0:
        return 0.0
    scale = weights.state[kernels.WSCALE]
    penalty = 0.5 * setup.l2 * scale * scale * float(np.dot(weights.v, weights.v))
    if setup.l1 > 0:
        penalty += setup.l1 * abs(scale) * float(np.abs(weights.v).sum())
    return penalty


def _check_finite(record, weights, setup):
    """Raise, on every rank alike, when training has overflowed (as scikit-learn does)."""
    finite = math.isfinite(record.loss) and math.isfinite(weights.state[kernels.WSCALE])
    finite = finite and bool(np.isfinite(weights.intercept).all())
    if finite:  # the weights: every rank holds the same after an epoch
        finite = kernels.all_finite(weights.v)
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
