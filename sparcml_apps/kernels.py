"""Compiled kernels of SGD training over CSR rows: losses, batch gradients, updates, TopK.

Kernels see no strings: the loss is an integer code (``LOSSES``). Weights are held as
``w = wscale * v`` (``v`` one flat float64 array of ``n_out * n_features`` entries, class
``c`` at ``c * n_features``) so that the L2 shrinkage of a step costs O(1), not O(n_features).
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
}
MAX_DLOSS = 1e12


@njit(cache=True, nogil=True)
def dloss(code, p, y, param):
    """The derivative of the loss with respect to the prediction ``p``."""
    if code == 0:
        return -y if p * y <= 1.0 else 0.0
    if code == 1:
        z = p * y
        if z > 18.0:
            return -y * np.exp(-z)
        if z < -18.0:
            return -y
        return -y / (np.exp(z) + 1.0)
    if code == 2:
        z = 1.0 - p * y
        return -2.0 * y * z if z > 0.0 else 0.0
    if code == 3:
        z = p * y
        if z >= 1.0:
            return 0.0
        if z >= -1.0:
            return -2.0 * (1.0 - z) * y
        return -4.0 * y
    r = p - y
    if code == 4:
        return r
    if code == 5:
        if abs(r) <= param:
            return r
        return param if r > 0.0 else -param
    if -r > param:
        return -1.0
    if r > param:
        return 1.0
    return 0.0


@njit(cache=True, nogil=True)
def loss(code, p, y, param):
    """The loss of predicting ``p`` for target ``y``."""
    if code == 0:
        return max(0.0, 1.0 - p * y)
    if code == 1:
        z = p * y
        if z > 18.0:
            return np.exp(-z)
        if z < -18.0:
            return -z
        return np.log1p(np.exp(-z))
    if code == 2:
        return max(0.0, 1.0 - p * y) ** 2
    if code == 3:
        z = p * y
        if z >= 1.0:
            return 0.0
        if z >= -1.0:
            return (1.0 - z) ** 2
        return -4.0 * z
    r = p - y
    if code == 4:
        return 0.5 * r * r
    if code == 5:
        if abs(r) <= param:
            return 0.5 * r * r
        return param * abs(r) - 0.5 * param * param
    return max(0.0, abs(r) - param)


@njit(cache=True, nogil=True)
def _target(y, c, n_out, multiclass):
    """Class ``c``'s target for label ``y``: +-1 one-vs-rest, else ``y`` itself."""
    if multiclass:
        return 1.0 if y == c else -1.0
    return y


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
def margins(indptr, indices, data, row, v, wscale, intercept, n_features, n_out, out):
    """``out[c]`` = the prediction of class ``c`` for ``row``."""
    for c in range(n_out):
        base = c * n_features
        total = 0.0
        for k in range(indptr[row], indptr[row + 1]):
            total += data[k] * v[base + indices[k]]
        out[c] = wscale * total + intercept[c]


@njit(cache=True, nogil=True)
def batch_gradient(
    indptr, indices, data, rows, y, row_weight, pos_weight, neg_weight,
    v, wscale, intercept, n_features, n_out, multiclass, code, param, eta,
    fit_intercept, slot, cols, acc, out_idx, out_val,
):  # fmt: skip
    """The step ``eta * gradient`` of the batch ``rows`` as a sparse vector; and its loss.

    Writes sorted flat indices (``c * n_features + column``, then the intercepts at
    ``n_out * n_features + c``) and values to ``out_idx``/``out_val``; returns their count
    and the batch's summed (weighted) loss. ``slot`` (all -1, length ``n_features``) maps a
    column to its place in ``acc``; it is all -1 again on return.
    """
    found = 0
    loss_sum = 0.0
    p = np.empty(n_out)
    coef = np.empty(n_out)
    intercept_step = np.zeros(n_out)
    for r in range(rows.size):
        row = rows[r]
        margins(indptr, indices, data, row, v, wscale, intercept, n_features, n_out, p)
        active = False
        for c in range(n_out):
            target = _target(y[row], c, n_out, multiclass)
            weight = row_weight[row] * (pos_weight[c] if target > 0 else neg_weight[c])
            loss_sum += weight * loss(code, p[c], target, param)
            g = dloss(code, p[c], target, param)
            g = min(max(g, -MAX_DLOSS), MAX_DLOSS)
            coef[c] = eta * weight * g
            intercept_step[c] += coef[c]
            active = active or coef[c] != 0.0
        if not active:
            continue
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
                acc[s * n_out + c] += coef[c] * data[k]
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
    if fit_intercept:
        for c in range(n_out):
            if intercept_step[c] != 0.0:
                out_idx[n] = n_out * n_features + c
                out_val[n] = intercept_step[c]
                n += 1
    return n, loss_sum


@njit(cache=True, nogil=True)
def apply_step(
    idx, val, v, wscale, intercept, n_weights, intercept_decay,
    l1_total, l1_applied, average_sum, average_offsets,
):  # fmt: skip
    """Subtract the summed step ``(idx, val)`` from the weights ``wscale * v``.

    With ``l1_total > 0`` the touched weights then take the cumulative L1 penalty not yet
    applied to them (``l1_applied``); with ``average_sum >= 0`` every change of ``v`` is
    booked into ``average_offsets`` for the lazily kept average of the weights.
    """
    for e in range(idx.size):
        j = idx[e]
        if j >= n_weights:
            intercept[j - n_weights] -= val[e] * intercept_decay
            continue
        before = v[j]
        v[j] -= val[e] / wscale
        if l1_total > 0.0:
            w = wscale * v[j]
            clipped = w
            if w > 0.0:
                clipped = max(0.0, w - (l1_total + l1_applied[j]))
            elif w < 0.0:
                clipped = min(0.0, w + (l1_total - l1_applied[j]))
            l1_applied[j] += clipped - w
            v[j] = clipped / wscale
        if average_sum >= 0.0:
            average_offsets[j] += average_sum * (v[j] - before)


@njit(cache=True, nogil=True)
def apply_l1_everywhere(v, wscale, l1_total, l1_applied, average_sum, average_offsets):
    """Give every weight the cumulative L1 penalty it has not taken yet."""
    for j in range(v.size):
        w = wscale * v[j]
        clipped = w
        if w > 0.0:
            clipped = max(0.0, w - (l1_total + l1_applied[j]))
        elif w < 0.0:
            clipped = min(0.0, w + (l1_total - l1_applied[j]))
        if clipped != w:
            l1_applied[j] += clipped - w
            before = v[j]
            v[j] = clipped / wscale
            if average_sum >= 0.0:
                average_offsets[j] += average_sum * (v[j] - before)


@njit(cache=True, nogil=True)
def topk(idx, val, k, residual, in_support, support, n_support, keep_rest, out_idx, out_val):
    """Add ``(idx, val)`` to ``residual`` and take out its ``k`` largest magnitudes.

    ``support[:n_support]`` lists the nonzeros of ``residual`` (flagged in ``in_support``).
    The taken entries go to ``out_idx``/``out_val`` sorted by index and leave the residual;
    without ``keep_rest`` the rest is dropped too. Ties at the k-th magnitude go to the
    entries that entered the support first. Returns (entries taken, new ``n_support``).
    """
    for e in range(idx.size):
        j = idx[e]
        residual[j] += val[e]
        if not in_support[j]:
            in_support[j] = True
            support[n_support] = j
            n_support += 1
    if n_support <= k:
        taken = n_support
        out_idx[:taken] = support[:taken]
    else:
        magnitude = np.empty(n_support)
        for s in range(n_support):
            magnitude[s] = abs(residual[support[s]])
        threshold = np.partition(magnitude, n_support - k)[n_support - k]
        taken = 0
        for s in range(n_support):
            if magnitude[s] > threshold:
                out_idx[taken] = support[s]
                taken += 1
        for s in range(n_support):
            if taken == k:
                break
            if magnitude[s] == threshold:
                out_idx[taken] = support[s]
                taken += 1
    sort_keys(out_idx, taken, np.empty(taken, out_idx.dtype))
    for t in range(taken):
        j = out_idx[t]
        out_val[t] = residual[j]
        residual[j] = 0.0
    kept = 0
    for s in range(n_support):
        j = support[s]
        if residual[j] != 0.0 and keep_rest:
            support[kept] = j
            kept += 1
        else:
            residual[j] = 0.0
            in_support[j] = False
    return taken, kept
