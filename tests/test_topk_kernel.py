"""The TopK kernel of training against numpy: the k largest magnitudes, the residual."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sparcml_apps.training import exchange_kernels


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 30_000),
    k_fraction=st.floats(0, 1),
    levels=st.sampled_from([3, 1000, 0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_kth_largest_is_the_sorted_value(n, k_fraction, levels, seed):
    # few distinct levels make ties; levels=0: all distinct
    rng = np.random.default_rng(seed)
    values = rng.integers(0, levels, n).astype(float) if levels else rng.standard_normal(n)
    k = 1 + int(k_fraction * (n - 1))
    assert exchange_kernels.kth_largest(values, k) == np.sort(values)[::-1][k - 1]


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(10, 20_000),
    steps=st.integers(1, 6),
    k=st.integers(1, 300),
    keep_rest=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_topk_takes_the_largest_and_keeps_the_rest(size, steps, k, keep_rest, seed):
    rng = np.random.default_rng(seed)
    residual = np.zeros(size)
    in_support = np.zeros(size, np.bool_)
    support = np.empty(size, np.int64)
    n_support = 0
    expected = np.zeros(size)
    for _ in range(steps):
        idx = np.sort(rng.choice(size, rng.integers(0, min(size, 500) + 1), replace=False))
        val = rng.integers(-4, 5, idx.size).astype(float)  # small integers: ties, zeros
        out_idx, out_val = np.empty(k + idx.size, np.int64), np.empty(k + idx.size)
        taken, n_support = exchange_kernels.topk(
            idx, val, k, residual, in_support, support, n_support, keep_rest, out_idx, out_val
        )
        expected[idx] += val
        sent = np.zeros(size)
        sent[out_idx[:taken]] = out_val[:taken]
        nonzero = np.flatnonzero(expected)
        assert taken == min(k, nonzero.size)
        assert np.all(np.diff(out_idx[:taken]) > 0) and np.all(out_val[:taken] != 0)
        # what is sent holds the largest magnitudes and comes out of the vector unchanged
        assert np.array_equal(sent[out_idx[:taken]], expected[out_idx[:taken]])
        left = np.abs(np.delete(expected, out_idx[:taken]))
        if taken and left.size:
            assert left.max() <= np.abs(out_val[:taken]).min()
        expected = expected - sent if keep_rest else np.zeros(size)
        assert np.array_equal(residual, expected)
        assert np.array_equal(np.sort(support[:n_support]), np.flatnonzero(expected))
        assert np.array_equal(in_support, expected != 0)
