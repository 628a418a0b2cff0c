"""A plain numpy replay of lock-step TopK training on several ranks, with the diagnostics.

Binary log-loss, L2 penalty, a constant rate, rows in each rank's order (no shuffle): every
step each rank p takes its next ``batch`` rows, forms ``acc_p = residual_p + eta * grad_p``
(dense), sends its ``k`` largest magnitudes ``sent_p`` and keeps the rest (with error
feedback); the model takes the sum of the ``sent_p`` and of the intercept steps.
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


def reference_topk_fit(
    blocks, *, alpha, eta0, batch, epochs, k, intercept_decay, error_feedback=True, delayed=False
):
    """Train on ``blocks``, one ``(X, y)`` a rank (y in +-1). With ``delayed`` (overlap), a
    step's gradient is taken before the step before it is applied. Returns ``w``, ``b`` and
    per epoch the lists of ``gamma`` (largest over the ranks) and ``xi``, one a step."""
    width = blocks[0][0].shape[1]
    w, b = np.zeros(width), 0.0
    residual = [np.zeros(width) for _ in blocks]
    steps = max(-(-X.shape[0] // batch) for X, _ in blocks)
    gammas, xis = [], []

    def apply(total_sent, intercept_step, rows_in_step):
        nonlocal w, b
        w *= max(0.0, 1.0 - eta0 * alpha) ** rows_in_step
        w -= total_sent
        b -= intercept_step * intercept_decay

    for _ in range(epochs):
        gammas.append([])
        xis.append([])
        pending = None
        for step in range(steps):
            accs, sents, intercept_step, rows_in_step = [], [], 0.0, 0
            for p, (X, y) in enumerate(blocks):
                rows = X[step * batch : (step + 1) * batch]
                target = y[step * batch : (step + 1) * batch]
                coef = eta0 * log_loss_slope(rows @ w + b, target)
                acc = residual[p] + rows.T @ coef
                sent = topk_dense(acc, k)
                residual[p] = acc - sent if error_feedback else np.zeros(width)
                accs.append(acc)
                sents.append(sent)
                intercept_step += coef.sum()
                rows_in_step += rows.shape[0]
            gammas[-1].append(max(gamma_dense(a, s) for a, s in zip(accs, sents, strict=True)))
            xis[-1].append(xi_dense(accs, sents, k))
            if pending is not None:
                apply(*pending)
            pending = np.sum(sents, axis=0), intercept_step, rows_in_step
            if not delayed:
                apply(*pending)
                pending = None
        if pending is not None:
            apply(*pending)
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
