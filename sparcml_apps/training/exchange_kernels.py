"""Compiled kernels of the exchanges between ranks: a rank's changes as a sparse vector,
settling the agreed model (L1, averaging), and TopK of the changes.

The weights, ``params`` and ``state`` are laid out as in :mod:`sparcml_apps.training.kernels`.
"""

import numpy as np
from numba import njit

from .kernels import AVERAGE_SUM, L1, change_weight, sort_keys


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
