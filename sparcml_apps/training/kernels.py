"""Compiled kernels of SGD training over CSR rows: losses, learning rates, steps.

Kernels see no strings: options are numbers in a float64 ``params`` array and the running
scalars live in a float64 ``state`` array, both indexed by the constants below. Weights are
held as ``w = wscale * v`` (``v`` one flat float64 array of ``n_out * n_features`` entries,
class ``c`` at ``c * n_features``) so that the L2 shrinkage of a step costs O(1), not
O(n_features). The average of the weights is kept lazily too: with ``S`` the running sum of
``wscale`` since averaging began, the summed weights are ``S * v - offsets``, where every
change ``d`` of ``v[j]`` adds ``S * d`` to ``offsets[j]``.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

LOSSES = {
    "hinge": 0,
    "log_loss": 1,
    "squared_hinge": 2,
    "modified_huber": 3,
    "squared_error": 4,
    "huber": 5,
    "epsilon_insensitive": 6,
    "perceptron": 7,
    "squared_epsilon_insensitive": 8,
}
SCHEDULES = {"constant": 0, "optimal": 1, "invscaling": 2, "adaptive": 3, "pa1": 4, "pa2": 5}
PASSIVE_AGGRESSIVE = 4  # schedules from this code on size each row's step by its loss
MAX_DLOSS = 1e12
AHEAD = 8
"""The steps ask the CPU for the entries of the row this many rows ahead of the one they
read, and for where the row as many rows further on starts: a row's entries lie anywhere
in the rows' memory, and a step that reads them unasked waits for them (an epoch over
url-like rows takes a third longer)."""

# params: the options of a fit
(
    SCHEDULE,
    ETA0,
    POWER_T,
    ALPHA,
    T0,
    L2,
    L1,
    INTERCEPT_DECAY,
    AVERAGE_START,
    LOSS,
    LOSS_PARAM,
    N_FEATURES,
    N_OUT,
    MULTICLASS,
    FIT_INTERCEPT,
    N_PARAMS,
) = range(16)
# state: the running scalars of a model
WSCALE, T, L1_TOTAL, AVERAGE_SUM, AVERAGE_STEPS, ETA, CLIPPED, N_STATE = range(8)
RENORMALIZE_BELOW = 1e-9  # a wscale below this is folded into v


@njit(cache=True, nogil=True)
def loss_and_slope(code, p, y, param):
    """The loss of predicting ``p`` for target ``y``, and its derivative in ``p``."""
    if code == 0:  # hinge
        z = p * y
        return (1.0 - z, -y) if z <= 1.0 else (0.0, 0.0)
    if code == 7:  # perceptron: hinge with threshold 0
        z = p * y
        return (-z, -y) if z <= 0.0 else (0.0, 0.0)
    if code == 1:  # log_loss
        z = p * y
        if z > 18.0:
            e = np.exp(-z)
            return e, -y * e
        if z < -18.0:
            return -z, -y
        e = np.exp(-z)
        return np.log1p(e), -y * e / (1.0 + e)
    if code == 2:  # squared_hinge
        z = 1.0 - p * y
        return (z * z, -2.0 * y * z) if z > 0.0 else (0.0, 0.0)
    if code == 3:  # modified_huber
        z = p * y
        if z >= 1.0:
            return 0.0, 0.0
        if z >= -1.0:
            return (1.0 - z) ** 2, -2.0 * (1.0 - z) * y
        return -4.0 * z, -4.0 * y
    r = p - y
    if code == 4:  # squared_error
        return 0.5 * r * r, r
    if code == 5:  # huber
        if abs(r) <= param:
            return 0.5 * r * r, r
        return param * abs(r) - 0.5 * param * param, (param if r > 0.0 else -param)
    if code == 8:  # squared_epsilon_insensitive
        if -r > param:
            return (-r - param) ** 2, -2.0 * (-r - param)
        if r > param:
            return (r - param) ** 2, 2.0 * (r - param)
        return 0.0, 0.0
    # epsilon_insensitive
    if -r > param:
        return -r - param, -1.0
    if r > param:
        return r - param, 1.0
    return 0.0, 0.0


@njit(cache=True, nogil=True)
def sort_keys(keys, n, scratch):
    """Sort ``keys[:n]`` (non-negative integers) in place: radix sort, 11 bits a pass."""
    if n < 64:
        for i in range(1, n):
            key = keys[i]
            j = i - 1
            while j >= 0 and keys[j] > key:
                keys[j + 1] = keys[j]
                j -= 1
            keys[j + 1] = key
        return
    top = keys[0]
    for i in range(n):
        top = max(top, keys[i])
    counts = np.empty(2049, np.int64)
    src, dst = keys, scratch
    shift = 0
    passes = 0
    while shift == 0 or (top >> shift) > 0:
        counts[:] = 0
        for i in range(n):
            counts[((src[i] >> shift) & 2047) + 1] += 1
        for d in range(2048):
            counts[d + 1] += counts[d]
        for i in range(n):
            d = (src[i] >> shift) & 2047
            dst[counts[d]] = src[i]
            counts[d] += 1
        src, dst = dst, src
        shift += 11
        passes += 1
    if passes % 2:
        keys[:n] = scratch[:n]


@njit(cache=True, nogil=True)
def rate(params, state):
    """The learning rate at the current sample time ``state[T]`` (passive-aggressive
    schedules: ``eta0``, the rate of the L2 shrink; :func:`batch_coefs` sizes their steps)."""
    schedule = params[SCHEDULE]
    if schedule == 0 or schedule >= PASSIVE_AGGRESSIVE:
        return params[ETA0]
    if schedule == 1:
        return 1.0 / (params[ALPHA] * (params[T0] + state[T] - 1.0))
    if schedule == 2:
        return params[ETA0] / state[T] ** params[POWER_T]
    return state[ETA]


def warm_up():
    """Call a compiled kernel once: a process's first call sets numba's typing up (0.25 to
    0.45 s of a core), which a process that waits for its first fit does here."""
    rate(np.zeros(N_PARAMS), np.zeros(N_STATE))


@njit(cache=True, nogil=True)
def batch_coefs(
    indptr,
    indices,
    data,
    rows,
    y,
    row_weight,
    pos_weight,
    neg_weight,
    params,
    state,
    v,
    intercept,
    eta,
    coefs,
):
    """``coefs[c, r]`` = eta * weight * dloss of row ``rows[r]`` for output ``c``, all
    predicted with the weights as they are, the slope clipped at ``MAX_DLOSS`` (counted in
    ``state[CLIPPED]``); returns the rows' summed (weighted) loss.

    Passive-aggressive schedules size each row's step by its loss instead of ``eta``:
    ``min(eta0, loss / ||x||^2)`` ("pa1"; none for an empty row) or
    ``loss / (||x||^2 + 1 / (2 eta0))`` ("pa2"), over the batch's rows."""
    n_features = int(params[N_FEATURES])
    code = int(params[LOSS])
    multiclass = params[MULTICLASS] > 0
    schedule = params[SCHEDULE]
    eta0 = params[ETA0]
    wscale = state[WSCALE]
    loss_sum = 0.0
    for c in range(int(params[N_OUT])):
        shift = np.uint64(c * n_features)  # unsigned indexing: no negative-index test
        for r in range(rows.size):
            row = rows[r]
            dot = 0.0
            for k in range(indptr[row], indptr[row + 1]):
                dot += data[k] * v[shift + indices[k]]
            target = y[row]
            if multiclass:
                target = 1.0 if target == c else -1.0
            weight = row_weight[row] * (pos_weight[c] if target > 0 else neg_weight[c])
            value, slope = loss_and_slope(
                code, wscale * dot + intercept[c], target, params[LOSS_PARAM]
            )
            loss_sum += weight * value
            if slope > MAX_DLOSS or slope < -MAX_DLOSS:
                state[CLIPPED] += 1.0
                slope = MAX_DLOSS if slope > 0 else -MAX_DLOSS
            if schedule < PASSIVE_AGGRESSIVE:
                coefs[c, r] = eta * weight * slope
                continue
            norm = 0.0
            for k in range(indptr[row], indptr[row + 1]):
                norm += data[k] * data[k]
            if schedule == PASSIVE_AGGRESSIVE:
                step = min(eta0, value / norm) if norm > 0.0 else 0.0
            else:
                step = value / (norm + 0.5 / eta0)
            coefs[c, r] = step / rows.size * weight * slope
    return loss_sum


@njit(cache=True, nogil=True)
def change_weight(j, dv, params, state, model, l1_applied, offsets, booked_at):
    """``model[j] += dv``, then the L1 penalty the weight still owes; books the change
    into the average as made when the running sum of ``wscale`` was ``booked_at``."""
    before = model[j]
    model[j] += dv
    if params[L1] > 0.0:
        wscale = state[WSCALE]
        w = wscale * model[j]
        clipped = w
        if w > 0.0:
            clipped = max(0.0, w - (state[L1_TOTAL] + l1_applied[j]))
        elif w < 0.0:
            clipped = min(0.0, w + (state[L1_TOTAL] - l1_applied[j]))
        l1_applied[j] += clipped - w
        model[j] = clipped / wscale
    if state[AVERAGE_SUM] >= 0.0 and offsets.size > 0:
        offsets[j] += booked_at * (model[j] - before)


@njit(cache=True, nogil=True)
def renormalize(state, v, agreed, residual, offsets):
    """Fold ``wscale`` into every array it scales: ``v`` (this rank's weights, which the
    average books), ``agreed`` (the model the ranks agreed on, or empty) and ``residual``
    (or empty)."""
    scale = state[WSCALE]
    if state[AVERAGE_SUM] >= 0.0:  # the summed weights S * v - offsets stay the same
        for j in range(offsets.size):
            offsets[j] -= state[AVERAGE_SUM] * v[j]
        state[AVERAGE_SUM] = 0.0
    for j in range(v.size):
        v[j] *= scale
    for j in range(agreed.size):
        agreed[j] *= scale
    for j in range(residual.size):
        residual[j] *= scale
    state[WSCALE] = 1.0


@njit(cache=True, nogil=True)
def all_finite(values):
    """Whether every one of ``values`` is finite: one pass, strided or not (numpy's
    ``min`` and ``max`` of the model's weights, which sit between their offsets, take
    two)."""
    finite = True
    for i in range(values.size):
        finite &= abs(values[i]) < np.inf
    return finite


@intrinsic
def _prefetch(typingctx, array, i):
    """Ask the CPU for the cache line of ``array[i]``: a hint, which changes no result
    and never faults (an ``i`` out of bounds is fine)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        view = context.make_array(sig.args[0])(context, builder, args[0])
        address = cgutils.get_item_pointer(
            context, builder, sig.args[0], view, [args[1]], wraparound=False
        )
        i32, byte = ir.IntType(32), ir.IntType(8).as_pointer()
        hint = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]),
            "llvm.prefetch",  # LLVM names it by the pointer type it takes
        )
        # a read, kept in every cache level, of data
        builder.call(hint, [builder.bitcast(address, byte), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(array, types.intp), codegen


@njit(cache=True, nogil=True)
def fetch_rows(indptr, indices, data, order, lo, hi, end):
    """Ask the CPU for the entries of the rows ``order[lo:hi]`` (64-byte lines) and for
    where the rows :data:`AHEAD` after them start, no row at or past ``end``."""
    for i in range(lo + AHEAD, min(hi + AHEAD, end)):
        _prefetch(indptr, np.intp(order[i]))
    for i in range(lo, min(hi, end)):
        start, stop = np.intp(indptr[order[i]]), np.intp(indptr[order[i] + 1])
        if start == stop:
            continue
        for k in range(start, stop, 64 // indices.itemsize):
            _prefetch(indices, k)
        for k in range(start, stop, 64 // data.itemsize):
            _prefetch(data, k)
        _prefetch(indices, stop - 1)
        _prefetch(data, stop - 1)


@njit(cache=True, nogil=True)
def steps(
    indptr,
    indices,
    data,
    order,
    first,
    stop,
    batch,
    y,
    row_weight,
    pos_weight,
    neg_weight,
    params,
    state,
    v,
    intercept,
    l1_applied,
    offsets,
    average_intercept,
    agreed,
    residual,
    flags,
    touched,
    n_touched,
    coefs,
    loss_sum,
):
    """Steps ``first`` to ``stop - 1`` of an epoch over this rank's rows ``order``; the
    summed (weighted) loss of the epoch's rows so far (``loss_sum`` before them, so that
    the sum is the same however the epoch's steps are split), the count of weights listed
    in ``touched``, the step it stopped before: ``stop``, or earlier where ``wscale`` must
    first be folded into the weights (:func:`renormalize`), and whether a step shrank the
    weights to zero.

    Step ``s`` takes the rows ``order[s * batch : (s + 1) * batch]`` (none once they run
    out): the mean of their gradients at the rate of the current sample time, after the L2
    shrink of one step, ``wscale *= max(0, 1 - eta * l2)``; the sample time then advances
    by one. A shrink to zero (``eta * l2 >= 1``) makes every weight zero before the step's
    changes: the model, the agreed model and the ``residual`` fold the zero scale in (the
    caller zeroes the weights of changes in flight).
    With ``agreed`` empty the steps change the model itself (L1 per weight through
    :func:`change_weight`); otherwise this rank's copy ``v`` (plain updates: the ranks book
    L1 when they exchange, :func:`settle`). Once averaging began, each change ``d`` of
    ``v[j]`` adds ``S * d`` to ``offsets[j]`` (``S`` the running sum of ``wscale``) and
    every step adds the intercepts to ``average_intercept``: the average is that of this
    rank's own weights, step by step. With ``flags`` not empty, every weight the steps
    change is listed once in ``touched`` (and flagged).
    """
    n_features = int(params[N_FEATURES])
    n_out = int(params[N_OUT])
    decay = params[INTERCEPT_DECAY] if params[FIT_INTERCEPT] > 0 else 0.0
    alone = agreed.size == 0
    listing = flags.size > 0
    zeroed = False
    end = min(stop * batch, order.size)
    for s in range(first, stop):
        if state[WSCALE] < RENORMALIZE_BELOW:
            return loss_sum, n_touched, s, zeroed
        eta = rate(params, state)
        shrink = max(0.0, 1.0 - eta * params[L2])
        lo = min(s * batch, order.size)
        rows = order[lo : min(lo + batch, order.size)]
        fetch_rows(indptr, indices, data, order, lo + AHEAD, lo + rows.size + AHEAD, end)
        if rows.size > 0:
            loss_sum += batch_coefs(
                indptr,
                indices,
                data,
                rows,
                y,
                row_weight,
                pos_weight,
                neg_weight,
                params,
                state,
                v,
                intercept,
                eta / rows.size,
                coefs,
            )
        state[WSCALE] *= shrink
        if shrink == 0.0:  # every weight is zero now
            renormalize(state, v, agreed, residual, offsets)
            zeroed = True
        if (
            params[AVERAGE_START] > 0
            and state[AVERAGE_SUM] < 0
            and state[T] >= params[AVERAGE_START]
        ):
            state[AVERAGE_SUM] = 0.0
        averaging = state[AVERAGE_SUM] >= 0.0
        state[L1_TOTAL] += eta * params[L1]
        # a rank's copy, or a model without L1: the changes are booked here, inline
        plain = not alone or params[L1] == 0.0
        timed = averaging and offsets.size > 0
        scale = 1.0 / state[WSCALE]
        at = state[AVERAGE_SUM]
        for c in range(n_out):
            shift = np.uint64(c * n_features)
            for r in range(rows.size):
                coef = coefs[c, r]
                if coef == 0.0:
                    continue
                intercept[c] -= coef * decay
                row = rows[r]
                step = coef * scale
                if plain:
                    for k in range(indptr[row], indptr[row + 1]):
                        j = shift + indices[k]
                        change = step * data[k]
                        v[j] -= change
                        if timed:
                            offsets[j] -= at * change
                        if listing and not flags[j]:
                            flags[j] = True
                            touched[n_touched] = j
                            n_touched += 1
                else:
                    for k in range(indptr[row], indptr[row + 1]):
                        change_weight(
                            shift + indices[k],
                            -(coef * data[k]) / state[WSCALE],
                            params,
                            state,
                            v,
                            l1_applied,
                            offsets,
                            at,
                        )
        if averaging:
            state[AVERAGE_SUM] += state[WSCALE]
            state[AVERAGE_STEPS] += 1
            for c in range(n_out):
                average_intercept[c] += intercept[c]
        state[T] += 1.0
    return loss_sum, n_touched, stop, zeroed
