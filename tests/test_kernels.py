import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from collectives._kernels import accumulate, merge_add, merge_runs


def sparse(draw, size, dtype):
    indices = np.array(
        sorted(draw(st.sets(st.integers(0, size - 1), max_size=size))), dtype=np.uint32
    )
    values = np.array(
        draw(st.lists(st.integers(-50, 50), min_size=indices.size, max_size=indices.size)),
        dtype=dtype,
    )
    return indices, values


def dense(indices, values, size):
    out = np.zeros(size, values.dtype)
    out[indices] = values
    return out


@st.composite
def vectors(draw, count):
    size = draw(st.integers(1, 60))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return size, [sparse(draw, size, dtype) for _ in range(count)]


@settings(max_examples=200, deadline=None)
@given(vectors(2))
def test_merge_add_equals_dense_sum(case):
    size, [(ia, va), (ib, vb)] = case
    io, vo = merge_add(ia, va, ib, vb)
    assert np.all(np.diff(io.astype(np.int64)) > 0)
    np.testing.assert_array_equal(io, np.union1d(ia, ib))
    np.testing.assert_array_equal(dense(io, vo, size), dense(ia, va, size) + dense(ib, vb, size))
    assert vo.dtype == va.dtype


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 9).flatmap(vectors))
def test_merge_runs_equals_dense_sum(case):
    size, runs = case
    expected = sum((dense(i, v, size) for i, v in runs), np.zeros(size))
    if not runs:
        return
    idx = np.concatenate([i for i, _ in runs])
    val = np.concatenate([v for _, v in runs])
    offsets = np.cumsum([0] + [i.size for i, _ in runs]).astype(np.int64)
    io, vo = merge_runs(idx, val, offsets)
    assert np.all(np.diff(io.astype(np.int64)) > 0)
    np.testing.assert_array_equal(io, np.unique(idx))
    np.testing.assert_array_equal(dense(io, vo, size), expected)


def test_merge_runs_leaves_input_alone():
    idx = np.array([1, 3, 0, 3], np.uint32)
    val = np.array([1.0, 2.0, 3.0, 4.0])
    merge_runs(idx, val, np.array([0, 2, 4], np.int64))
    np.testing.assert_array_equal(idx, [1, 3, 0, 3])
    np.testing.assert_array_equal(val, [1.0, 2.0, 3.0, 4.0])


def test_accumulate_adds_at_offset():
    out = np.zeros(4)
    accumulate(np.array([10, 12, 12], np.uint32), np.array([1.0, 2.0, 3.0]), 10, out)
    np.testing.assert_array_equal(out, [1.0, 0.0, 5.0, 0.0])
