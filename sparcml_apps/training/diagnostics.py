"""Convergence diagnostics of TopK with error feedback (Alistarh et al., NeurIPS'18).

With ``acc_p`` the vector rank ``p`` accumulates (its residual plus its new step) and
``TopK`` the k entries of largest magnitude:

- ``gamma = ||acc - TopK(acc)|| / ||acc||``: how much of a rank's vector TopK leaves behind
  (the paper's contraction bound asks for gamma < 1, as it is for k >= 1);
- ``xi = ||sum_p TopK(acc_p) - TopK(sum_p acc_p)|| / ||sum_p acc_p||``: how far the sum of
  the local TopKs is from the TopK of the sum; the analysis needs it bounded (small).

Vectors are :class:`collectives.SparseVector`; a dense 1-D array is taken as one too.
"""

import numpy as np

from collectives import SparseVector


def _sparse(vec):
    return vec if isinstance(vec, SparseVector) else SparseVector.from_dense(np.asarray(vec))


def topk(vec, k):
    """The ``k`` entries of largest magnitude (ties to the lower index), sorted by index."""
    vec = _sparse(vec)
    if k >= vec.nnz:
        return vec
    order = np.lexsort((vec.indices, -np.abs(vec.values)))[:k]
    order.sort()
    return SparseVector(vec.indices[order], vec.values[order], vec.size, check=False)


def norm(vec):
    """The Euclidean norm."""
    return float(np.linalg.norm(_sparse(vec).values))


def difference_norm(a, b):
    """``||a - b||`` of two vectors of one size."""
    a, b = _sparse(a), _sparse(b)
    union, where = np.unique(np.concatenate([a.indices, b.indices]), return_inverse=True)
    diff = np.zeros(union.size)
    np.add.at(diff, where[: a.nnz], a.values)
    np.subtract.at(diff, where[a.nnz :], b.values)
    return float(np.linalg.norm(diff))


def gamma(acc, k):
    """``||acc - TopK(acc)|| / ||acc||`` (0 for a zero vector)."""
    acc = _sparse(acc)
    total = norm(acc)
    if total == 0:
        return 0.0
    kept = norm(topk(acc, k))
    return float(np.sqrt(max(total**2 - kept**2, 0.0)) / total)


def xi(sum_of_topks, sum_of_accs, k):
    """``||sum_p TopK(acc_p) - TopK(sum_p acc_p)|| / ||sum_p acc_p||`` (0 for a zero sum)."""
    total = norm(sum_of_accs)
    if total == 0:
        return 0.0
    return difference_norm(sum_of_topks, topk(sum_of_accs, k)) / total
