"""A plain numpy replay of training as documented: local steps on every rank, and every
``period`` steps the mean of the ranks' changes (optionally TopK of them, with error
feedback, and optionally a period late: overlap), with the TopK diagnostics.

Everything is in the weights' own units (no ``wscale``) and dense: rows in each rank's
order (no shuffle); a step of rank p takes its next ``batch`` rows, the mean of their
gradients at the rate of the sample time ``t`` (steps so far), after the L2 shrink of one
step, which every copy, the agreed model, the residuals and the changes in flight take
alike. On one rank
without compression the steps change the model itself (L1 clipped on the touched
weights, the average summing the model); otherwise each rank changes its own copy, and
at an exchange the agreed model takes the mean over the ranks that held rows in the
period, L1 clipped where it changed; each rank's average sums its own copy after every
step, and the model's average is the mean of the ranks'.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import make_classification


def topk_dense(vec, k):
    """``vec`` with all but its ``k`` largest magnitudes set to zero (ties: lower index)."""
    kept = np.zeros_like(vec)
    top = np.argsort(-np.abs(vec), kind="stable")[:k]
    kept[top] = vec[top]
    return kept


def gamma_dense(acc, sent):
    total = np.linalg.norm(acc)
    return np.linalg.norm(acc - sent) / total if total > 0 else 0.0


def xi_dense(accs, sents, k):
    """xi of the ranks' dense ``accs`` and the ``sents`` TopK took from them."""
    total_acc, total_sent = np.sum(accs, axis=0), np.sum(sents, axis=0)
    total = np.linalg.norm(total_acc)
    if total == 0:
        return 0.0
    return np.linalg.norm(total_sent - topk_dense(total_acc, k)) / total


def log_loss_slope(p, y):
    """The derivative of the log loss in ``p``, with scikit-learn's cut-offs at |p y| > 18."""
    z = p * y
    e = np.exp(-np.clip(z, -18.0, None))
    return np.where(z > 18.0, -y * e, np.where(z < -18.0, -y, -y * e / (1.0 + e)))


def squared_error_slope(p, y):
    return p - y


def hinge_slope(p, y):
    return np.where(p * y <= 1.0, -y, 0.0)


SLOPES = {"log_loss": log_loss_slope, "squared_error": squared_error_slope, "hinge": hinge_slope}


def passive_aggressive_steps(rows, margin, target, learning_rate, eta0):
    """The step of each row (hinge loss): ``min(eta0, loss / ||x||^2)`` ("pa1", none for an
    empty row) or ``loss / (||x||^2 + 1 / (2 eta0))`` ("pa2")."""
    loss = np.maximum(0.0, 1.0 - margin * target)
    norm = np.asarray(rows.multiply(rows).sum(axis=1)).ravel()
    if learning_rate == "pa1":
        return np.where(norm > 0, np.minimum(eta0, loss / np.where(norm > 0, norm, 1.0)), 0.0)
    return loss / (norm + 0.5 / eta0)


def reference_fit(
    blocks,
    *,
    alpha,
    batch,
    epochs,
    period=1,
    l1_ratio=0.0,
    average=0,
    intercept_decay=0.01,
    loss="log_loss",
    learning_rate="constant",
    eta0=0.01,
    power_t=0.5,
    k=None,
    error_feedback=True,
    overlap=False,
):
    """Train on ``blocks``, one ``(X, y)`` a rank (y in +-1, or values). ``average``: the
    sample time averaging starts at (0: never; "auto": the second epoch); ``k``: TopK of
    the changes (None: all).
    Returns ``w``, ``b`` (averaged with ``average``) and per epoch the lists of ``gamma``
    (largest over the ranks) and ``xi``, one an exchange (with ``k``)."""
    slope = SLOPES[loss]
    width = blocks[0][0].shape[1]
    nprocs = len(blocks)
    alone = nprocs == 1 and k is None
    w, b = np.zeros(width), 0.0  # the agreed model (the model itself when alone)
    copies = [np.zeros(width) for _ in blocks]
    intercepts = [0.0] * nprocs
    residuals = [np.zeros(width) for _ in blocks]
    counts = [X.shape[0] for X, _ in blocks]
    steps = max(-(-n // batch) for n in counts)
    if average == "auto":
        average = steps + 1
    t, l1_total, l1_applied = 1.0, 0.0, np.zeros(width)
    # each rank's sums of its own weights and intercept over the averaged steps
    sums, intercept_sums, averaged_steps = [np.zeros(width) for _ in blocks], [0.0] * nprocs, 0
    gammas, xis = [], []
    # with overlap: the mean change in flight, its intercept's, each rank's own changes
    pending = None

    def clip(model, columns):
        for j in columns:
            z = model[j]
            if z > 0:
                model[j] = max(0.0, z - (l1_total + l1_applied[j]))
            elif z < 0:
                model[j] = min(0.0, z + (l1_total - l1_applied[j]))
            l1_applied[j] += model[j] - z

    def settle(change, intercept_change):
        """The agreed model takes the change; returns what it took (L1 clipped)."""
        nonlocal b
        before = w.copy()
        w[:] += change
        b += intercept_change
        if l1_ratio > 0:
            clip(w, np.flatnonzero(change))
        return w - before

    for _ in range(epochs):
        gammas.append([])
        xis.append([])
        for step in range(steps):
            if learning_rate == "optimal":
                # as scikit-learn: the first step at the rate of a typical weight
                typical = np.sqrt(1.0 / np.sqrt(alpha))
                eta = 1.0 / (alpha * (1.0 / (typical * alpha) + t - 1.0))
            elif learning_rate in ("constant", "pa1", "pa2"):
                eta = eta0
            else:
                eta = eta0 / t**power_t
            coefs = []
            for p, (X, y) in enumerate(blocks):
                rows = X[step * batch : (step + 1) * batch]
                own = w if alone else copies[p]
                margin = rows @ own + (b if alone else intercepts[p])
                target = y[step * batch : (step + 1) * batch]
                rates = eta
                if learning_rate in ("pa1", "pa2"):
                    rates = passive_aggressive_steps(rows, margin, target, learning_rate, eta0)
                coefs.append(rates * slope(margin, target) / max(rows.shape[0], 1))
            factor = max(0.0, 1.0 - eta * alpha * (1 - l1_ratio))
            w *= factor
            for p in range(nprocs):
                copies[p] *= factor
                residuals[p] *= factor
            if pending is not None:  # changes in flight shrink with the weights
                change, intercept_change, mine = pending
                mine = [(m * factor, i) for m, i in mine]
                pending = change * factor, intercept_change, mine
            l1_total += eta * alpha * l1_ratio
            averaging = average and t >= average
            for p, (X, _) in enumerate(blocks):
                rows = X[step * batch : (step + 1) * batch]
                if alone:
                    w -= rows.T @ coefs[p]
                    b -= coefs[p].sum() * intercept_decay
                    if l1_ratio > 0:
                        clip(w, np.unique(rows.indices))
                else:
                    copies[p] -= rows.T @ coefs[p]
                    intercepts[p] -= coefs[p].sum() * intercept_decay
            if averaging:
                averaged_steps += 1
                for p in range(nprocs):
                    sums[p] += w if alone else copies[p]
                    intercept_sums[p] += b if alone else intercepts[p]
            t += 1
            if alone or not ((step + 1) % period == 0 or step + 1 == steps):
                continue
            # an exchange
            first = step + 1 - ((step % period) + 1)
            active = sum(n > first * batch for n in counts)
            if pending is not None:  # the copies take the agreed model's change instead
                change, intercept_change, mine = pending
                applied = settle(change, intercept_change)
                for p in range(nprocs):
                    copies[p] += applied - mine[p][0]
                    intercepts[p] += intercept_change - mine[p][1]
                pending = None
            mine = [(copies[p] - w, intercepts[p] - b) for p in range(nprocs)]
            sents, accs = [], []
            for p in range(nprocs):
                change = mine[p][0]
                if k is not None:
                    acc = residuals[p] + change
                    sent = topk_dense(acc, k)
                    residuals[p] = acc - sent if error_feedback else np.zeros(width)
                    accs.append(acc)
                    change = sent
                sents.append(change)
            if k is not None:
                gammas[-1].append(max(gamma_dense(a, s) for a, s in zip(accs, sents, strict=True)))
                xis[-1].append(xi_dense(accs, sents, k))
            change = np.sum(sents, axis=0) / active
            intercept_change = sum(m[1] for m in mine) / active
            if overlap and step + 1 < steps:
                pending = change, intercept_change, mine
                continue
            settle(change, intercept_change)
            for p in range(nprocs):
                copies[p] = w.copy()
                intercepts[p] = b
        if l1_ratio > 0:
            clip(w, range(width))
        for p in range(nprocs):
            copies[p] = w.copy()
            intercepts[p] = b
    if average and averaged_steps:
        mean = np.mean(sums, axis=0) if not alone else sums[0]
        intercept = np.mean(intercept_sums) if not alone else intercept_sums[0]
        return mean / averaged_steps, intercept / averaged_steps, gammas, xis
    return w, b, gammas, xis


def sparse_problem(n_samples=300, n_features=200, n_classes=2, seed=0):
    """Small sparse rows (about 18% nonzero) and labels, binary in +-1 or class indices."""
    X, y = make_classification(
        n_samples=n_samples,
        n_features=n_features,
        n_informative=20,
        n_classes=n_classes,
        random_state=seed,
    )
    X[np.abs(X) < 1.5] = 0.0
    return sp.csr_matrix(X), (np.where(y == 1, 1.0, -1.0) if n_classes == 2 else y)
