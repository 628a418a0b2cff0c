"""Compiled kernels of SGD training over CSR rows: losses, steps, exchanges, TopK.

Kernels see no strings: options are numbers in a float64 ``params`` array and the running
scalars live in a float64 ``state`` array, both indexed by the constants below. Weights are
held as ``w = wscale * v`` (``v`` one flat float64 array of ``n_out * n_features`` entries,
class ``c`` at ``c * n_features``) so that the L2 shrinkage of a step costs O(1), not
O(n_features). The average of the weights is kept lazily too: with ``S`` the running sum of
``wscale`` since averaging began, the summed weights are ``S * v - offsets``, where every
change ``d`` of ``v[j]`` adds ``S * d`` to ``offsets[j]``.
"""

import numpy as np
from numba import njit

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
    for s in range(first, stop):
        if state[WSCALE] < RENORMALIZE_BELOW:
            return loss_sum, n_touched, s, zeroed
        eta = rate(params, state)
        shrink = max(0.0, 1.0 - eta * params[L2])
        lo = min(s * batch, order.size)
        rows = order[lo : min(lo + batch, order.size)]
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


@njit(cache=True, nogil=True)
def changes(v, agreed, intercept, agreed_intercept, flags, touched, n_touched, out_idx, out_val):
    """This rank's changes since the ranks last agreed, as a sparse vector: the weights
    where ``v - agreed`` is not zero, then every intercept's, at index ``v.size + c``.

    The weights come from the ``touched`` list (sorted there, flags cleared) when
    ``flags`` is not empty, else from one pass over the model. Returns the count of
    entries, written if the output has room for them all; else call again with that
    room (only a pass over the model can find more than the room it was given, and that
    pass writes nothing else)."""
    n_weights, n_out = v.size, intercept.size
    room = out_idx.size - n_out
    n = 0
    count = n_touched if flags.size else n_weights
    if flags.size:
        sort_keys(touched, n_touched, np.empty(n_touched, touched.dtype))
    for i in range(count):
        j = touched[i] if flags.size else i
        if flags.size:
            flags[j] = False
        if v[j] != agreed[j]:
            if n < room:
                out_idx[n] = j
                out_val[n] = v[j] - agreed[j]
            n += 1
    if n <= room:
        for c in range(n_out):
            out_idx[n + c] = n_weights + c
            out_val[n + c] = intercept[c] - agreed_intercept[c]
    return n + n_out


@njit(cache=True, nogil=True)
def changes_dense(v, agreed, intercept, agreed_intercept, out):
    """This rank's changes since the ranks last agreed, dense: ``v - agreed``, then the
    intercepts', in ``out`` (one pass over the model). Returns the entries :func:`changes`
    would have written: the weights that changed and every intercept."""
    n_weights, n = v.size, 0
    for j in range(n_weights):
        change = v[j] - agreed[j]
        out[j] = change
        n += change != 0.0
    for c in range(intercept.size):
        out[n_weights + c] = intercept[c] - agreed_intercept[c]
    return n + intercept.size


@njit(cache=True, nogil=True)
def settle_dense(total, scale, params, state, v, agreed, agreed_intercept, l1_applied, offsets,
                 no_offsets):  # fmt: skip
    """:func:`settle` of a dense sum ``total`` (the weights', then the intercepts'), with
    no changes of this rank's own in flight; then this rank's copy takes the agreed
    model (:func:`adopt`)."""
    n_weights = agreed.size
    for c in range(agreed_intercept.size):
        agreed_intercept[c] += total[n_weights + c] * scale
    if params[L1] > 0.0:
        for j in range(n_weights):
            if total[j] != 0.0:
                change_weight(j, total[j] * scale, params, state, agreed, l1_applied,
                              no_offsets, 0.0)  # fmt: skip
        adopt(v, agreed, offsets, state)
        return
    at = state[AVERAGE_SUM]  # one pass, no branch: a weight equal already books 0
    if at >= 0.0 and offsets.size > 0:
        for j in range(n_weights):
            agreed[j] += total[j] * scale
            offsets[j] += at * (agreed[j] - v[j])
            v[j] = agreed[j]
    else:
        for j in range(n_weights):
            agreed[j] += total[j] * scale
            v[j] = agreed[j]


@njit(cache=True, nogil=True)
def _adopt_weight(j, v, agreed, offsets, at):
    """``v[j] = agreed[j]``, the jump booked into the average (``at`` >= 0: averaging)."""
    if at >= 0.0 and offsets.size > 0:
        offsets[j] += at * (agreed[j] - v[j])
    v[j] = agreed[j]


@njit(cache=True, nogil=True)
def adopt(v, agreed, offsets, state):
    """This rank's copy takes the agreed model, every weight that differs booked into
    its average as changed now."""
    at = state[AVERAGE_SUM]
    for j in range(v.size):
        if v[j] != agreed[j]:
            _adopt_weight(j, v, agreed, offsets, at)


@njit(cache=True, nogil=True)
def adopt_listed(v, agreed, offsets, state, touched, n_touched, idx):
    """:func:`adopt` for the ``touched`` weights and the weights in ``idx`` only (the
    others are equal)."""
    at = state[AVERAGE_SUM]
    for i in range(n_touched):
        _adopt_weight(touched[i], v, agreed, offsets, at)
    for e in range(idx.size):
        if idx[e] < v.size:
            _adopt_weight(idx[e], v, agreed, offsets, at)


@njit(cache=True, nogil=True)
def settle(
    idx,
    val,
    scale,
    own_idx,
    own_val,
    params,
    state,
    v,
    intercept,
    agreed,
    agreed_intercept,
    l1_applied,
    offsets,
    no_offsets,
):
    """Add ``scale`` times the ranks' summed changes ``(idx, val)`` to the agreed model,
    with L1 booked (the agreed model is no rank's own: it books no average;
    ``no_offsets`` is an empty array).

    With ``own_idx`` not empty the changes travelled while this rank took more steps: its
    copy takes the agreed model's change in place of its own changes ``(own_idx,
    own_val)`` and keeps the steps taken since, both booked into its average as changed
    now. (Otherwise the caller makes the copy the agreed model: :func:`adopt`.)
    """
    n_weights = agreed.size
    late = own_idx.size > 0
    at = state[AVERAGE_SUM]
    timed = at >= 0.0 and offsets.size > 0
    for e in range(own_idx.size):
        j = own_idx[e]
        if j < n_weights:
            v[j] -= own_val[e]
            if timed:
                offsets[j] -= at * own_val[e]
        else:
            intercept[j - n_weights] -= own_val[e]
    end = np.searchsorted(idx, n_weights)
    for e in range(end, idx.size):
        c = idx[e] - n_weights
        change = val[e] * scale
        agreed_intercept[c] += change
        if late:
            intercept[c] += change
    for e in range(end):
        j = idx[e]
        before = agreed[j]
        if params[L1] > 0.0:
            change_weight(j, val[e] * scale, params, state, agreed, l1_applied, no_offsets, 0.0)
        else:
            agreed[j] += val[e] * scale
        if late:
            jump = agreed[j] - before
            v[j] += jump
            if timed:
                offsets[j] += at * jump


@njit(cache=True, nogil=True)
def apply_l1_everywhere(params, state, model, l1_applied, offsets):
    """Give every weight the cumulative L1 penalty it has not taken yet."""
    for j in range(model.size):
        change_weight(j, 0.0, params, state, model, l1_applied, offsets, state[AVERAGE_SUM])


@njit(cache=True, nogil=True)
def union_growth(indptr, indices, order, lengths, n_columns):
    """For each of the increasing ``lengths``, the distinct columns and the nonzeros of the
    first ``lengths[i]`` rows of ``order``."""
    seen = np.zeros(n_columns, np.bool_)
    columns = np.zeros(lengths.size, np.int64)
    nonzeros = np.zeros(lengths.size, np.int64)
    distinct = 0
    entries = 0
    done = 0
    for i in range(lengths.size):
        for r in range(done, lengths[i]):
            row = order[r]
            for k in range(indptr[row], indptr[row + 1]):
                if not seen[indices[k]]:
                    seen[indices[k]] = True
                    distinct += 1
            entries += indptr[row + 1] - indptr[row]
        done = lengths[i]
        columns[i] = distinct
        nonzeros[i] = entries
    return columns, nonzeros


@njit(cache=True, nogil=True)
def kth_largest(values, k):
    """The ``k``-th largest of ``values`` (1 <= k <= size), exactly; selects among the
    values above a bound taken from a strided sample when that leaves at least ``k``."""
    n = values.size
    m = min(n, 4096)
    wanted = 2 * (k * m // n) + 16  # sample entries above the bound: about 2k + 16 n/m overall
    if wanted < m:
        sample = values[:: n // m][:m].copy()
        bound = np.partition(sample, m - wanted)[m - wanted]
        count = 0
        for i in range(n):
            count += values[i] >= bound
        if k <= count < n // 2:
            candidates = np.empty(count)
            c = 0
            for i in range(n):
                if values[i] >= bound:
                    candidates[c] = values[i]
                    c += 1
            return np.partition(candidates, count - k)[count - k]
    return np.partition(values, n - k)[n - k]


@njit(cache=True, nogil=True)
def topk(idx, val, k, residual, in_support, support, n_support, keep_rest, out_idx, out_val):
    """Add ``(idx, val)`` to ``residual`` and take out its ``k`` largest magnitudes.

    ``support[:n_support]`` lists the nonzeros of ``residual`` (flagged in ``in_support``).
    The taken entries (nonzero ones only) go to ``out_idx``/``out_val`` sorted by index and
    leave the residual; without ``keep_rest`` the rest is dropped too. Ties at the k-th
    magnitude go to the entries that entered the support first. Returns (entries taken,
    new ``n_support``).
    """
    for e in range(idx.size):
        j = idx[e]
        residual[j] += val[e]
        if not in_support[j]:
            in_support[j] = True
            support[n_support] = j
            n_support += 1
    # magnitude[s] of support[s]: -1 once taken; the rest stays where it is nonzero
    magnitude = np.empty(n_support)
    for s in range(n_support):
        magnitude[s] = abs(residual[support[s]])
    # the k-th largest magnitude; entries that are zero are never taken
    threshold = 0.0 if n_support <= k else kth_largest(magnitude, k)
    taken = 0
    for s in range(n_support):
        if magnitude[s] > threshold:
            out_idx[taken] = support[s]
            magnitude[s] = -1.0
            taken += 1
    if threshold > 0.0:
        for s in range(n_support):
            if taken == k:
                break
            if magnitude[s] == threshold:
                out_idx[taken] = support[s]
                magnitude[s] = -1.0
                taken += 1
    sort_keys(out_idx, taken, np.empty(taken, out_idx.dtype))
    for t in range(taken):
        j = out_idx[t]
        out_val[t] = residual[j]
        residual[j] = 0.0
    kept = 0
    for s in range(n_support):
        j = support[s]
        if keep_rest and magnitude[s] > 0.0:
            support[kept] = j
            kept += 1
        else:
            residual[j] = 0.0
            in_support[j] = False
    return taken, kept
