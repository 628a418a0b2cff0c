"""gamma and xi of the TopK analysis on small vectors worked out by hand."""

import math

import numpy as np
import pytest

from collectives import SparseVector
from sparcml_apps.training import diagnostics


def test_topk_keeps_the_largest_magnitudes_in_index_order():
    vec = SparseVector([1, 4, 6, 9], [3.0, -5.0, 1.0, -3.0], 10)
    kept = diagnostics.topk(vec, 2)
    assert kept.indices.tolist() == [1, 4] and kept.values.tolist() == [3.0, -5.0]
    assert diagnostics.topk(vec, 9).nnz == 4


def test_gamma_by_hand():
    # x = (3, -4, 0, 12): ||x|| = 13; TopK with k=1 keeps 12, leaves (3, -4): norm 5
    x = np.array([3.0, -4.0, 0.0, 12.0])
    assert diagnostics.gamma(x, 1) == pytest.approx(5 / 13)
    assert diagnostics.gamma(x, 2) == pytest.approx(3 / 13)
    assert diagnostics.gamma(x, 3) == 0.0
    assert diagnostics.gamma(np.zeros(4), 1) == 0.0


def test_xi_by_hand():
    # two ranks: acc_0 = (4, 1, 0), acc_1 = (0, 3, 2); k = 1
    acc = [np.array([4.0, 1.0, 0.0]), np.array([0.0, 3.0, 2.0])]
    sum_of_topks = diagnostics.topk(acc[0], 1).to_dense() + diagnostics.topk(acc[1], 1).to_dense()
    total = acc[0] + acc[1]  # (4, 4, 2): TopK keeps (4, 0, 0) (tie to the lower index)
    assert sum_of_topks.tolist() == [4.0, 3.0, 0.0]
    expected = math.hypot(0.0, 3.0, 0.0) / math.sqrt(16 + 16 + 4)
    assert diagnostics.xi(sum_of_topks, total, 1) == pytest.approx(expected)
    # when the local TopKs add up to the global TopK, xi is 0
    assert diagnostics.xi(np.array([4.0, 4.0, 0.0]), total, 2) == 0.0


def test_difference_norm_of_sparse_vectors():
    a = SparseVector([0, 2], [1.0, 2.0], 5)
    b = SparseVector([2, 4], [2.0, 2.0], 5)
    assert diagnostics.difference_norm(a, b) == pytest.approx(math.sqrt(1 + 4))
