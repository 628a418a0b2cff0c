"""Compiled kernels of SGD training over CSR rows: losses, batch gradients, updates, TopK.

Kernels see no strings: options are numbers in a float64 ``params`` array and the running
scalars live in a float64 ``state`` array, both indexed by the constants below. Weights are
held as ``w = wscale * v`` (``v`` one flat float64 array of ``n_out * n_features`` entries,
class ``c`` at ``c * n_features``) so that the L2 shrinkage of a step costs O(1), not
O(n_features). The average of the weights is kept lazily too: with ``S`` the running sum of
``wscale`` since averaging began, the summed weights are ``base + S * v - offsets``, where
every change ``d`` of ``v[j]`` adds ``S * d`` to ``offsets[j]``.
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
}
SCHEDULES = {"constant": 0, "optimal": 1, "invscaling": 2, "adaptive": 3}
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
WSCALE, T, L1_TOTAL, AVERAGE_SUM, AVERAGE_STEPS, ETA, N_STATE = range(7)
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
    """The learning rate at the current sample time ``state[T]``."""
    schedule = params[SCHEDULE]
    if schedule == 0:
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
    predicted with the weights as they are; returns the rows' summed (weighted) loss."""
    n_features = int(params[N_FEATURES])
    code = int(params[LOSS])
    multiclass = params[MULTICLASS] > 0
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
            coefs[c, r] = eta * weight * min(max(slope, -MAX_DLOSS), MAX_DLOSS)
    return loss_sum


@njit(cache=True, nogil=True)
def batch_gradient(
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
    slot,
    cols,
    acc,
    out_idx,
    out_val,
):
    """The step ``eta * gradient`` of the batch ``rows`` as a sparse vector; and its loss.

    Writes sorted flat indices (``c * n_features + column``, then the intercepts at
    ``n_out * n_features + c``) and values to ``out_idx``/``out_val``; returns their count,
    the batch's summed (weighted) loss and the rate ``eta`` at the current sample time.
    ``slot`` (all -1, length ``n_features``) maps a column to its place in ``acc``; it is
    all -1 again on return.
    """
    n_features = int(params[N_FEATURES])
    n_out = int(params[N_OUT])
    eta = rate(params, state)
    coefs = np.empty((n_out, rows.size))
    loss_sum = batch_coefs(
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
    )
    found = 0
    for r in range(rows.size):
        active = False
        for c in range(n_out):
            active = active or coefs[c, r] != 0.0
        if not active:
            continue
        row = rows[r]
        for k in range(indptr[row], indptr[row + 1]):
            col = indices[k]
            s = slot[col]
            if s < 0:
                s = found
                slot[col] = s
                cols[s] = col
                found += 1
                for c in range(n_out):
                    acc[s * n_out + c] = 0.0
            for c in range(n_out):
                acc[s * n_out + c] += coefs[c, r] * data[k]
    sort_keys(cols, found, out_idx)
    n = 0
    for c in range(n_out):
        base = c * n_features
        for i in range(found):
            value = acc[slot[cols[i]] * n_out + c]
            if value != 0.0:
                out_idx[n] = base + cols[i]
                out_val[n] = value
                n += 1
    for i in range(found):
        slot[cols[i]] = -1
    if params[FIT_INTERCEPT] > 0:
        for c in range(n_out):
            step = coefs[c].sum()
            if step != 0.0:
                out_idx[n] = n_out * n_features + c
                out_val[n] = step
                n += 1
    return n, loss_sum, eta


@njit(cache=True, nogil=True)
def begin_step(params, state, v, eta, rows_in_step, offsets, base):
    """Shrink the weights by the L2 factor of ``rows_in_step`` per-row steps, start
    averaging when due, and add the step's share to the cumulative L1 penalty."""
    state[WSCALE] *= max(0.0, 1.0 - eta * params[L2]) ** rows_in_step
    if state[WSCALE] < RENORMALIZE_BELOW:
        if state[AVERAGE_SUM] >= 0.0:
            for j in range(v.size):
                base[j] += state[AVERAGE_SUM] * v[j] - offsets[j]
                offsets[j] = 0.0
            state[AVERAGE_SUM] = 0.0
        for j in range(v.size):
            v[j] *= state[WSCALE]
        state[WSCALE] = 1.0
    if params[AVERAGE_START] > 0 and state[AVERAGE_SUM] < 0 and state[T] >= params[AVERAGE_START]:
        state[AVERAGE_SUM] = 0.0
    state[L1_TOTAL] += eta * params[L1] * rows_in_step


@njit(cache=True, nogil=True)
def update_weight(j, step, params, state, v, l1_applied, offsets):
    """``w[j] -= step``, then the L1 penalty ``w[j]`` still owes; books the change."""
    before = v[j]
    v[j] -= step / state[WSCALE]
    if params[L1] > 0.0:
        w = state[WSCALE] * v[j]
        clipped = w
        if w > 0.0:
            clipped = max(0.0, w - (state[L1_TOTAL] + l1_applied[j]))
        elif w < 0.0:
            clipped = min(0.0, w + (state[L1_TOTAL] - l1_applied[j]))
        l1_applied[j] += clipped - w
        v[j] = clipped / state[WSCALE]
    if state[AVERAGE_SUM] >= 0.0:
        offsets[j] += state[AVERAGE_SUM] * (v[j] - before)


@njit(cache=True, nogil=True)
def end_step(state, intercept, average_intercept, rows_in_step):
    """Book the step into the average and advance the sample time."""
    if state[AVERAGE_SUM] >= 0.0:
        state[AVERAGE_SUM] += state[WSCALE]
        state[AVERAGE_STEPS] += 1
        for c in range(intercept.size):
            average_intercept[c] += intercept[c]
    state[T] += rows_in_step


@njit(cache=True, nogil=True)
def apply_step(idx, val, params, state, v, intercept, l1_applied, offsets):
    """Subtract the summed step ``(idx, val)`` (weights, then intercepts) from the model."""
    n_weights = v.size
    end = idx.size
    while end > 0 and idx[end - 1] >= n_weights:  # the intercepts come last
        end -= 1
        intercept[idx[end] - n_weights] -= val[end] * params[INTERCEPT_DECAY]
    if params[L1] == 0.0 and state[AVERAGE_SUM] < 0.0:  # without per-weight bookkeeping
        scale = 1.0 / state[WSCALE]
        for e in range(end):
            v[idx[e]] -= val[e] * scale
    else:
        for e in range(end):
            update_weight(idx[e], val[e], params, state, v, l1_applied, offsets)


@njit(cache=True, nogil=True)
def take_step(
    idx,
    val,
    eta,
    rows_in_step,
    params,
    state,
    v,
    intercept,
    l1_applied,
    offsets,
    base,
    average_intercept,
):
    """One whole step of the model: shrink, the summed update ``(idx, val)``, bookkeeping."""
    begin_step(params, state, v, eta, rows_in_step, offsets, base)
    apply_step(idx, val, params, state, v, intercept, l1_applied, offsets)
    end_step(state, intercept, average_intercept, rows_in_step)


@njit(cache=True, nogil=True)
def local_epoch(
    indptr,
    indices,
    data,
    order,
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
    base,
    average_intercept,
):
    """One epoch of mini-batch steps over ``order`` on a single rank; the summed loss.

    The same steps as ``batch_gradient`` + an allreduce over one rank + ``apply_step``,
    without forming the step as a vector: each row's update goes to the weights directly.
    """
    n_features = int(params[N_FEATURES])
    n_out = int(params[N_OUT])
    coefs = np.empty((n_out, batch))
    decay = params[INTERCEPT_DECAY] if params[FIT_INTERCEPT] > 0 else 0.0
    loss_sum = 0.0
    for start in range(0, order.size, batch):
        rows = order[start : start + batch]
        eta = rate(params, state)
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
            eta,
            coefs,
        )
        begin_step(params, state, v, eta, rows.size, offsets, base)
        plain = params[L1] == 0.0 and state[AVERAGE_SUM] < 0.0
        scale = 1.0 / state[WSCALE]
        for c in range(n_out):
            shift = np.uint64(c * n_features)
            for r in range(rows.size):
                coef = coefs[c, r]
                if coef == 0.0:
                    continue
                intercept[c] -= coef * decay
                row = rows[r]
                if plain:  # the common case, without per-weight bookkeeping
                    step = coef * scale
                    for k in range(indptr[row], indptr[row + 1]):
                        v[shift + indices[k]] -= step * data[k]
                else:
                    for k in range(indptr[row], indptr[row + 1]):
                        update_weight(
                            shift + indices[k],
                            coef * data[k],
                            params,
                            state,
                            v,
                            l1_applied,
                            offsets,
                        )
        end_step(state, intercept, average_intercept, rows.size)
    return loss_sum


@njit(cache=True, nogil=True)
def apply_l1_everywhere(params, state, v, l1_applied, offsets):
    """Give every weight the cumulative L1 penalty it has not taken yet."""
    for j in range(v.size):
        update_weight(j, 0.0, params, state, v, l1_applied, offsets)


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
