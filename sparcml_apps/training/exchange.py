"""How the ranks combine their local steps: every few steps, the mean of their changes.

Each rank takes SGD steps on its own rows against its own copy ``v`` of the model
(:func:`kernels.steps`). Every ``period`` steps the ranks exchange: each sends its changes
since they last agreed (the nonzeros of ``v - agreed``, found in one pass over the model,
and every intercept's) through :func:`collectives.allreduce`, and every rank adds the mean
of the changes, over the ranks that held rows in the period, to the agreed model
(:func:`kernels.settle`), which then replaces its copy where they differ, at the weights
this rank or the sum changed (:func:`kernels.adopt_listed`). The L2 shrink of a step is
the scalar ``wscale``, which every rank applies alike, so the changes stay sparse: the
union of the columns a rank's rows touched. With a period of one step
this is mini-batch SGD over all ranks' rows. Where the plan expects the sum of a period's
changes to be dense (the cost model's cheapest allreduce is the dense one), the changes
are written dense into a buffer kept for the fit (:func:`kernels.changes_dense`), summed
in place, and added and adopted in one call (:func:`kernels.settle_dense`). The changes
travel in ``setup.value_dtype`` (float32 unless asked otherwise: each rank's change
rounded to float32); the models stay in float64. Averaging costs no traffic: each rank
keeps the average of its own weights, jumps at the exchanges included, and the ranks take the
mean of their averages when the model is read (:meth:`.state.Weights.averaged`).

An exchange strategy is an object with ``begin_epoch``, ``__call__`` and ``end_epoch``;
the training loop reads the same whichever it is: :class:`Exchange` sends the exact changes,
:class:`TopKExchange` only the largest of them (and keeps the rest for later, with error
feedback). With ``overlap`` an exchange travels (:func:`collectives.iallreduce`) while the
next period's steps run, and is added when the next exchange begins.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import collectives
from collectives import SparseVector

from . import diagnostics, exchange_kernels, kernels
from .state import EMPTY

EXCHANGE_SHARE = 0.1
"""``local_steps="auto"`` picks the shortest period whose exchange the cost model
expects to take at most this share of the period's steps, or a shorter one where the
first epoch would otherwise take fewer than :func:`least_exchanges`."""
STEP_ENTRY_SECONDS = 8e-9
"""Seconds per nonzero of a step's rows (predicting, then updating the weights)."""
SCAN_SECONDS = 2e-9
"""Seconds per entry of the model an exchange passes over (finding the changes, copying
the agreed model back)."""
CHANGE_ENTRY_SECONDS = 1e-8
"""Seconds per entry of a rank's changes, besides the allreduce: writing them and adding
the mean to the agreed model."""
LIST_ENTRY_SECONDS = 6e-9
"""Seconds per nonzero of a step's rows to list the weights it touches, and to sort and
read them at the exchange."""
LIST_BELOW = 1 / 8
"""Changes are found from a list of the touched weights when a period's rows hold fewer
nonzeros than this share of the weights."""
GROWTH_SHARE = 1 / 4
"""The plan counts the distinct columns of this share of a rank's rows (at least
:data:`GROWTH_ROWS`), and extrapolates how they grow beyond (:func:`columns_of`)."""
GROWTH_ROWS = 4096


_EMPTY = SparseVector(np.empty(0, np.uint32), EMPTY, 1, check=False)


def make(setup, weights, comm):
    """The exchange strategy of ``setup``."""
    return (TopKExchange if setup.compression == "topk" else Exchange)(setup, weights, comm)


class Exchange:
    """The exact mean of the ranks' changes."""

    def __init__(self, setup, weights, comm):
        self.setup, self.weights, self.comm = setup, weights, comm
        self.params = setup.params()
        self.index_dtype = np.uint32 if setup.size < 2**32 else np.uint64
        self.listing = weights.listing  # find the changes from a list of touched weights
        self.period = weights.period  # this epoch's local steps (begin_epoch)
        n_weights = setup.n_out * setup.n_features
        # the changes written dense (the sum is expected dense), summed in place
        self.dense = np.empty(setup.size if weights.dense else 0, setup.value_dtype)
        self.flags = np.zeros(n_weights if self.listing else 0, np.bool_)
        self.touched = np.empty(0, np.int64)
        self.n_touched = 0
        # this rank's changes, written in place
        self.buffer = np.empty(0, self.index_dtype), np.empty(0, setup.value_dtype)
        self.pending = None  # with overlap: (request, active ranks, own changes)
        self.pending_zeroed = False  # a step shrank the weights to zero since it was sent
        self.calls = 0  # exchanges this epoch
        self.change_entries = self.sent_entries = 0  # this epoch's, of this rank
        self.dense_bytes = 0  # what a dense allreduce of the same vectors would send
        self.gamma, self.xi = [], []  # per exchange, with diagnostics

    def _room(self, n):
        """The buffer of this rank's changes, with room for ``n`` entries at least."""
        idx, val = self.buffer
        if idx.size < n:
            n = max(n, idx.size + idx.size // 2)
            self.buffer = np.empty(n, self.index_dtype), np.empty(n, self.setup.value_dtype)
        return self.buffer

    def reserve(self, entries):
        """Room to list ``entries`` more touched weights (when listing)."""
        need = min(self.n_touched + entries, self.flags.size)
        if need > self.touched.size:
            grown = np.empty(max(need, self.touched.size + self.touched.size // 2), np.int64)
            grown[: self.n_touched] = self.touched[: self.n_touched]
            self.touched = grown

    def begin_epoch(self, period, counts=None):
        """An epoch of ``period`` local steps between exchanges: its counts start at zero,
        or at ``counts`` (:meth:`counts`) in an epoch resumed midway."""
        self.period = period
        counts = counts or {}
        for name in ("calls", "change_entries", "sent_entries", "dense_bytes"):
            setattr(self, name, counts.get(name, 0))
        self.gamma, self.xi = list(counts.get("gamma", [])), list(counts.get("xi", []))

    def counts(self):
        """The epoch's counts so far (exchanges, entries, bytes, diagnostics)."""
        names = ("calls", "change_entries", "sent_entries", "dense_bytes", "gamma", "xi")
        return {name: getattr(self, name) for name in names}

    def __call__(self, active, stats):
        """Exchange the changes of a period in which ``active`` ranks held rows."""
        setup, w = self.setup, self.weights
        self.finish()  # the changes are taken against the newest agreed model
        options = {"algorithm": setup.algorithm, "stats": stats}
        nprocs = self.comm.Get_size()
        self.calls += 1
        self.dense_bytes += 2 * (nprocs - 1) * setup.size * self.dense.itemsize // nprocs
        if self.dense.size:
            self.change_entries += exchange_kernels.changes_dense(
                w.v, w.agreed, w.intercept, w.agreed_intercept, self.dense
            )
            self.sent_entries += self.dense.size
            options.update(algorithm="dense", out=self.dense)
            total = collectives.allreduce(self.dense, self.comm, **options)
            self._settle(total, 1.0 / active, _EMPTY)
            np.copyto(w.intercept, w.agreed_intercept)
            return
        idx, val = self._room(self.n_touched + setup.n_out if self.listing else 0)
        # (again, with more room, where a pass over the model found more than it holds)
        while (n := exchange_kernels.changes(w.v, w.agreed, w.intercept, w.agreed_intercept,
                    self.flags, self.touched, self.n_touched, idx, val)) > idx.size:  # fmt: skip
            idx, val = self._room(n)
        mine = SparseVector(idx[:n], val[:n], setup.size, check=False)
        self.change_entries += mine.nnz
        sent = self.outgoing(mine)
        self.sent_entries += sent.nnz
        if setup.quantization_bits:
            # the same on every rank, new every exchange: (seed, epoch, exchange)
            options["quantization_bits"] = setup.quantization_bits
            options["random_state"] = (setup.seed << 64) | (w.epochs << 32) | (self.calls - 1)
        if setup.overlap:
            self.pending = collectives.iallreduce(sent, self.comm, **options), active, mine
            self.n_touched = 0
            return
        total = collectives.allreduce(sent, self.comm, **options)
        total = self._settle(total, 1.0 / active, _EMPTY)
        # the copy differs from the agreed model where this rank changed a weight (listed,
        # or the weights of its changes, which come before the intercepts) or the sum did
        if self.listing:
            exchange_kernels.adopt_listed(w.v, w.agreed, w.offsets, w.state, self.touched,
                                          self.n_touched, total.indices)  # fmt: skip
            self.n_touched = 0
        elif total is not None:  # (else adopted as it was added)
            exchange_kernels.adopt_listed(w.v, w.agreed, w.offsets, w.state, mine.indices,
                                          mine.nnz - setup.n_out, total.indices)  # fmt: skip
        np.copyto(w.intercept, w.agreed_intercept)

    def _settle(self, total, scale, mine):
        """Add ``scale`` times the sum ``total`` to the agreed model
        (:func:`.exchange_kernels.settle`); the sum as a sparse vector, or None for a dense
        sum nothing needs the indices of (added and adopted by this rank's copy at once)."""
        w = self.weights
        if isinstance(total, np.ndarray) and not (mine.nnz or self.listing):
            exchange_kernels.settle_dense(total, scale, self.params, w.state, w.v, w.agreed,
                           w.agreed_intercept, w.l1_applied, w.offsets, EMPTY)  # fmt: skip
            return None
        if isinstance(total, np.ndarray):
            total = SparseVector.from_dense(total)
        exchange_kernels.settle(
            total.indices,
            total.values,
            scale,
            mine.indices,
            mine.values,
            self.params,
            w.state,
            w.v,
            w.intercept,
            w.agreed,
            w.agreed_intercept,
            w.l1_applied,
            w.offsets,
            EMPTY,
        )
        return total

    def finish(self):
        """Add the exchange in flight, if any (``overlap``): the agreed model takes the
        mean, and this rank's copy takes it instead of the changes it sent, keeping the
        steps it took meanwhile."""
        if self.pending is None:
            return
        request, active, mine = self.pending
        self.pending = None
        total = request.wait()
        if self.pending_zeroed:  # the weights' changes shrank to zero with the weights
            self.pending_zeroed = False
            n_weights = self.setup.n_out * self.setup.n_features
            if isinstance(total, np.ndarray):
                total[:n_weights] = 0.0
            else:
                total.values[: np.searchsorted(total.indices, n_weights)] = 0.0
            mine.values[: mine.nnz - self.setup.n_out] = 0.0
        self._settle(total, 1.0 / active, mine)

    def zero_in_flight(self):
        """A step shrank the weights to zero: so do the weights' changes in flight."""
        if self.pending is not None:
            self.pending_zeroed = True

    def end_epoch(self):
        """Nothing is in flight and every rank's copy is the agreed model (as an exchange
        that is not overlapped leaves it, the last of an epoch's steps being before one)."""
        if self.pending is None:
            return
        self.finish()
        w = self.weights
        exchange_kernels.adopt(w.v, w.agreed, w.offsets, w.state)
        np.copyto(w.intercept, w.agreed_intercept)

    def outgoing(self, changes):
        """What this rank sends of its ``changes``: all of them."""
        return changes


class TopKExchange(Exchange):
    """Only the ``topk`` largest of each rank's changes plus its residual (what earlier
    exchanges did not send, with error feedback); the intercepts always travel."""

    def outgoing(self, changes):
        setup, w = self.setup, self.weights
        n_weights = setup.n_out * setup.n_features
        if w.residual is None:
            w.residual = np.zeros(n_weights)
            w.in_support = np.zeros(n_weights, np.bool_)
            w.support = np.empty(n_weights, np.int64)
            w.n_support = 0
        split = np.searchsorted(changes.indices, n_weights)
        diagnose = setup.diagnostics
        accumulated = _accumulated(changes, split, w) if diagnose else None
        k = setup.k(self.period)
        extra = changes.nnz - split  # the intercepts
        idx = np.empty(k + extra, self.index_dtype)
        val = np.empty(k + extra, setup.value_dtype)
        taken, w.n_support = exchange_kernels.topk(
            changes.indices[:split],
            changes.values[:split],
            k,
            w.residual,
            w.in_support,
            w.support,
            w.n_support,
            setup.error_feedback,
            idx,
            val,
        )
        idx[taken : taken + extra] = changes.indices[split:]
        val[taken : taken + extra] = changes.values[split:]
        sent = SparseVector(idx[: taken + extra], val[: taken + extra], changes.size, check=False)
        if diagnose:
            gamma, xi = _diagnose(accumulated, sent, k, n_weights, self.comm)
            self.gamma.append(gamma)
            self.xi.append(xi)
        return sent


def _accumulated(changes, split, weights):
    """The vector TopK is taken from, in float64: the residual before the exchange plus
    the ``split`` weight entries of the changes (not the intercepts)."""
    idx = changes.indices[:split].astype(np.int64)
    if weights.n_support == 0:
        return SparseVector(
            idx, changes.values[:split].astype(np.float64), changes.size, check=False
        )
    indices = np.union1d(weights.support[: weights.n_support], idx)
    values = weights.residual[indices]
    values[np.searchsorted(indices, idx)] += changes.values[:split]
    return SparseVector(indices, values, changes.size, check=False)


def _diagnose(accumulated, sent, k, n_weights, comm):
    """``(gamma, xi)`` of one exchange, the same on every rank of ``comm``: the largest of
    the ranks' ``||acc_p - sent_p|| / ||acc_p||``, and ``xi`` of their sums (one exact
    allreduce of ``[acc_p | sent_p]``, not counted in the traffic, and one of the largest)."""
    from mpi4py import MPI

    taken = np.searchsorted(sent.indices, n_weights)  # the intercepts come last
    sent = SparseVector(
        sent.indices[:taken], sent.values[:taken].astype(np.float64), n_weights, check=False
    )
    accumulated = SparseVector(accumulated.indices, accumulated.values, n_weights, check=False)
    total = diagnostics.norm(accumulated)
    mine = diagnostics.difference_norm(accumulated, sent) / total if total > 0 else 0.0
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
    return float(largest[0]), diagnostics.xi(sum_sent, sum_accumulated, k)


def plan(setup, indptr, indices, order, steps, comm):
    """``(period, listing, dense)``: the local steps between exchanges, whether to find a
    rank's changes from a list of the weights its steps touched (else by a pass over the
    model), and whether to write them dense (the sum of a period's changes is expected
    dense), alike on every rank: the busiest rank's counts decide, and rank 0's calibration.

    The period is ``setup.local_steps``, or for ``"auto"`` the one :func:`auto_period`
    picks from how the columns of a rank's rows grow in ``order`` (counted on the first
    :data:`GROWTH_SHARE` of them, extrapolated beyond by :func:`columns_of`). Listing pays
    when a period touches few of the weights; dense changes, with ``algorithm="dense"``, or with
    "auto" where the cost model's cheapest allreduce of them is the dense one (not with
    TopK, overlap or listing).
    """
    from mpi4py import MPI

    batch = setup.batch_size
    counts = np.zeros((2, 64), np.int64)
    lengths = np.array([min(order.size, batch << i) for i in range(64)], np.int64)
    # the lengths counted: up to a share of the rows, two of them at least
    n = int(np.searchsorted(lengths, max(GROWTH_ROWS, order.size * GROWTH_SHARE), "right"))
    n = lengths.size if n < 2 or lengths[n - 1] == order.size else n
    if order.size:
        columns, nonzeros = exchange_kernels.union_growth(
            indptr, indices, order, lengths[:n], setup.n_features
        )
        counts[:, :n] = columns, nonzeros
        for i in range(n, lengths.size):  # past the rows counted
            counts[0, i] = columns_of(lengths[:n], columns, lengths[i], setup.n_features)
            counts[1, i] = nonzeros[-1] * lengths[i] // lengths[n - 1]
    collectives.wait(comm.Iallreduce(MPI.IN_PLACE, counts, op=MPI.MAX), comm)
    costs = Costs.of(setup, comm.Get_size(), collectives.cost_constants(comm))
    if setup.local_steps == "auto":
        period_steps = auto_period(costs, counts[0], counts[1], steps)
    else:
        period_steps = max(1, min(int(setup.local_steps), steps))
    i = min(max(period_steps - 1, 0).bit_length(), 63)  # counts of >= period_steps steps
    listing = costs.listing(int(counts[1, i]))
    entries = int(counts[0, i]) * setup.n_out + setup.n_out
    dense = not (listing or setup.overlap or setup.compression) and (
        setup.algorithm == "dense"
        or (setup.algorithm == "auto" and costs.fastest(entries) == "dense")
    )
    return period_steps, listing, dense


def columns_of(lengths, columns, rows, n_columns):
    """Distinct columns of ``rows`` rows, from ``columns[i]``, those of the first
    ``lengths[i]`` (doubling): up to ``lengths[-1]`` interpolated, beyond by the power law
    of the last doubling (Heaps' law), at most ``n_columns``. From a quarter of 160,000
    url-like rows (3.2M power-law columns) it gives all of them 16% more columns than they
    hold, 1% more on url-like-dense rows."""
    if rows <= lengths[-1]:
        return float(np.interp(rows, lengths, columns))
    grown = columns[-1] / columns[-2] if columns[-2] > 0 else lengths[-1] / lengths[-2]
    slope = np.log(grown) / np.log(lengths[-1] / lengths[-2])
    return float(min(n_columns, columns[-1] * (rows / lengths[-1]) ** slope))


@dataclass(frozen=True)
class Costs:
    """What the cost model expects the steps and the exchanges of a setup to take on
    ``nprocs`` ranks (``constants``: the allreduce's alpha, beta, gamma...)."""

    size: int
    n_out: int
    n_weights: int
    nprocs: int
    itemsize: int
    index_itemsize: int
    constants: dict
    union: Callable | None = None
    """The nonzeros of the sum of ``count`` ranks' changes, for the allreduce (None: the
    cost model's uniformly random supports)."""

    @classmethod
    def of(cls, setup, nprocs, constants):
        return cls(
            size=setup.size,
            n_out=setup.n_out,
            n_weights=setup.n_out * setup.n_features,
            nprocs=nprocs,
            itemsize=np.dtype(setup.value_dtype).itemsize,
            index_itemsize=4 if setup.size < 2**32 else 8,
            constants=constants,
        )

    def listing(self, nonzeros):
        """Whether a period of ``nonzeros`` finds its changes from a list."""
        return nonzeros * self.n_out < LIST_BELOW * self.n_weights

    def steps(self, nonzeros):
        """Seconds of the steps over rows of ``nonzeros``."""
        return nonzeros * self.n_out * STEP_ENTRY_SECONDS

    def predictions(self, entries):
        """The cost model's predictions of every allreduce of ``entries`` a rank, by name."""
        return {
            name: collectives.cost_model.predict(
                name,
                self.nprocs,
                self.size,
                entries,
                value_itemsize=self.itemsize,
                index_itemsize=self.index_itemsize,
                union=self.union,
                **self.constants,
            )
            for name in collectives.ALGORITHMS
        }

    def fastest(self, entries):
        """The name of the cheapest allreduce of ``entries`` a rank (None on one rank)."""
        if self.nprocs == 1:
            return None
        predictions = self.predictions(entries)
        return min(predictions, key=lambda name: predictions[name].seconds)

    def allreduce(self, entries):
        """The cost model's prediction of the cheapest allreduce of ``entries`` a rank
        (seconds, bytes sent), or None on one rank."""
        if self.nprocs == 1:
            return None
        return min(self.predictions(entries).values(), key=lambda p: p.seconds)

    def exchange(self, columns, nonzeros):
        """Seconds of an exchange after steps over rows of ``columns`` distinct columns
        and ``nonzeros``: finding the changes, the allreduce, adding the mean."""
        entries = columns * self.n_out + self.n_out
        if self.listing(nonzeros):
            cost = nonzeros * self.n_out * LIST_ENTRY_SECONDS
        else:
            cost = self.size * SCAN_SECONDS
        allreduce = self.allreduce(entries)
        return cost + entries * CHANGE_ENTRY_SECONDS + (allreduce.seconds if allreduce else 0.0)


def auto_period(costs, columns, nonzeros, steps):
    """The shortest power of two of steps whose exchange ``costs`` expects to take at most
    :data:`EXCHANGE_SHARE` of its steps' time, at most the longest that gives an epoch of
    ``steps`` :func:`least_exchanges`, evened out so that an epoch's periods are alike.
    ``columns[i]`` and ``nonzeros[i]``: the distinct columns and the nonzeros of a rank's
    first ``2**i`` steps' rows."""
    least = least_exchanges(costs.nprocs)
    for i in range(len(columns)):
        period_steps = min(1 << i, steps)
        exchange = costs.exchange(int(columns[i]), int(nonzeros[i]))
        cheap = exchange <= EXCHANGE_SHARE * costs.steps(int(nonzeros[i]))
        fewer = -(-steps // min(2 << i, steps)) < least  # (the next period's exchanges)
        if cheap or fewer or period_steps == steps:
            return _evened(period_steps, steps)
    return steps


def _evened(period, steps):
    """The period of as many exchanges in an epoch of ``steps`` steps as ``period`` gives,
    spread evenly over the epoch."""
    return -(-steps // -(-steps // period))


def least_exchanges(nprocs):
    """The exchanges the first epoch on ``nprocs`` ranks takes at least, whatever they
    cost: one for every pair of ranks (later epochs, as their rate allows:
    :func:`epoch_period`). Ranks that step long apart drift, and the mean of their
    changes then makes less progress an epoch than one rank's steps over the same rows,
    the more so the more ranks there are: on url-like rows, 8 ranks that exchange once an
    epoch fall about two epochs behind one rank's test accuracy by the fourth epoch, with
    32 exchanges an epoch not at all; 2 ranks lose little with one. The number does not
    depend on the machine, so neither do the epochs a fit runs."""
    return nprocs * (nprocs - 1) // 2


def epoch_period(period, steps, epoch, params):
    """The local steps between exchanges in the ``epoch``-th epoch (from 1) of ``steps``
    steps, where the first exchanges every ``period`` steps (``local_steps="auto"``;
    ``params``: the kernels' options): longer as the learning rate falls.

    Ranks drift apart by about the rate times the steps between two exchanges. An epoch
    whose rate at its start is a k-th of the rate at the end of the first epoch exchanges
    k times less often (evened out over the epoch), so that none of its periods drifts
    further than the first epoch's last; the rates are those at the sample times of a rank
    with ``steps`` steps an epoch. With ``"optimal"`` the k-th epoch exchanges about k - 1
    times less often than the first (the second as often), with ``"invscaling"``
    ``(k - 1) ** power_t`` times; with a constant, ``"adaptive"`` or passive-aggressive
    rate every epoch as often as the first. Shorter for the second epoch (k times less
    often in the k-th), the fits of hinge loss on 8 and 16 ranks fell behind in it and ran
    up to 12 epochs where one rank runs 7.
    """
    if epoch <= 1 or period >= steps:
        return period
    state = np.zeros(kernels.N_STATE)
    state[kernels.ETA] = params[kernels.ETA0]  # "adaptive": as the first epoch's
    rates = []
    for n in (1, epoch - 1):
        state[kernels.T] = n * steps + 1.0
        rates.append(kernels.rate(params, state))
    if not rates[1] > 0:  # a rate that grows or vanishes: as the first epoch
        return period
    longer = int(period * min(rates[0] / rates[1], steps))
    return period if longer <= period else _evened(longer, steps)
