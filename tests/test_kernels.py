import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from collectives._kernels import accumulate, from_bitmap, merge_add, merge_runs, to_bitmap
from sparcml_apps.training import kernels


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


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([np.uint32, np.uint64]),
    st.integers(0, 2**33),
    st.integers(1, 300).flatmap(lambda n: st.sets(st.integers(0, n - 1)).map(lambda s: (n, s))),
)
def test_a_bitmap_marks_the_indices_of_its_range_and_gives_them_back(dtype, lo, case):
    length, members = case
    if dtype is np.uint32:
        lo %= 2**32 - length
    indices = np.array(sorted(members), np.uint64).astype(dtype) + dtype(lo)
    bits = 8 * np.dtype(dtype).itemsize
    words = np.full(-(-length // bits), 0xA5, dtype)  # not zeroed: the kernel must
    to_bitmap(indices, lo, words)
    # numpy's reading of the same words: bit b of word w, least significant bit first
    marked = np.unpackbits(words.view(np.uint8), bitorder="little")
    np.testing.assert_array_equal(np.flatnonzero(marked), sorted(members))
    out = np.empty(indices.size, dtype)
    assert from_bitmap(words, lo, out) == indices.size
    np.testing.assert_array_equal(out, indices)


def test_the_rows_asked_for_ahead_are_rows_of_the_order_before_its_end():
    """The steps' hints to the CPU (:func:`kernels.fetch_rows`) read the order and the
    row pointers in bounds at every edge: compiled with bounds checks, nothing raises."""
    checked = numba.njit(boundscheck=True)(kernels.fetch_rows.py_func)
    indptr = np.array([0, 3, 3, 7, 40], np.uint32)  # an empty row, then a long last one
    indices, data = np.arange(40, dtype=np.uint32), np.ones(40)
    order = np.array([3, 1, 0, 2], np.uint32)
    for lo in range(order.size + 2):
        for hi in range(lo, order.size + kernels.AHEAD + 2):
            for end in range(order.size + 1):
                checked(indptr, indices, data, order, lo, hi, end)
    with np.testing.assert_raises(IndexError):  # the check is on: past the order raises
        checked(indptr, indices, data, order, 3, 6, order.size + 2)


@st.composite
def copies(draw):
    """A rank's copy ``v`` of a model, the ``agreed`` model it differs from in places,
    and the intercepts of both."""
    size = draw(st.integers(1, 60))
    agreed = np.array(draw(st.lists(st.integers(-9, 9), min_size=size, max_size=size)), float)
    changed = np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    v = agreed + changed * np.array(
        draw(st.lists(st.integers(1, 9), min_size=size, max_size=size)), float
    )
    n_out = draw(st.integers(1, 2))
    return v, agreed, np.arange(1.0, n_out + 1), np.zeros(n_out)


def expected_changes(v, agreed, intercept, agreed_intercept):
    changed = np.flatnonzero(v != agreed)
    idx = np.concatenate([changed, v.size + np.arange(intercept.size)])
    val = np.concatenate([(v - agreed)[changed], intercept - agreed_intercept])
    return idx, val.astype(np.float32)


@settings(max_examples=100, deadline=None)
@given(copies(), st.data())
def test_changes_counts_them_and_writes_them_when_they_fit(model, data):
    from sparcml_apps.training.exchange_kernels import changes

    idx, val = expected_changes(*model)
    room = data.draw(st.integers(0, idx.size + 2))
    out_idx, out_val = np.full(room + 4, 999, np.uint32), np.full(room + 4, 99, np.float32)
    no_flags, no_list = np.empty(0, np.bool_), np.empty(0, np.int64)
    n = changes(*model, no_flags, no_list, 0, out_idx[:room], out_val[:room])
    assert n == idx.size
    written = n if n <= room else max(0, room - model[2].size)  # (weights that fit)
    np.testing.assert_array_equal(out_idx[:written], idx[:written])
    np.testing.assert_array_equal(out_val[:written], val[:written])
    assert (out_idx[room:] == 999).all() and (out_val[room:] == 99).all()


@settings(max_examples=100, deadline=None)
@given(copies(), st.randoms(use_true_random=False))
def test_changes_from_a_list_of_touched_weights(model, random):
    from sparcml_apps.training.exchange_kernels import changes

    v = model[0]
    idx, val = expected_changes(*model)
    # every changed weight listed once, some unchanged ones too, in no order
    listed = [j for j in range(v.size) if v[j] != model[1][j] or random.random() < 0.3]
    random.shuffle(listed)
    touched = np.array(listed + [0] * 3, np.int64)  # room past the list
    flags = np.zeros(v.size, np.bool_)
    flags[listed] = True
    room = len(listed) + model[2].size
    out_idx, out_val = np.empty(room, np.uint32), np.empty(room, np.float32)
    n = changes(*model, flags, touched, len(listed), out_idx, out_val)
    np.testing.assert_array_equal(out_idx[:n], idx)
    np.testing.assert_array_equal(out_val[:n], val)
    assert not flags.any()


@settings(max_examples=100, deadline=None)
@given(copies(), st.data())
def test_adopting_the_changed_and_summed_weights_is_adopting_all(model, data):
    from sparcml_apps.training import exchange_kernels, kernels

    v, agreed = model[0], model[1].copy()
    own = np.flatnonzero(v != agreed).astype(np.uint32)
    summed = np.array(sorted(data.draw(st.sets(st.integers(0, v.size + 1)))), np.uint32)
    agreed[summed[summed < v.size]] += 0.5  # the sum added (intercepts at the end)
    state = np.zeros(kernels.N_STATE)
    state[kernels.AVERAGE_SUM] = 3.0
    offsets = np.arange(v.size, dtype=float)
    by_pass = v.copy(), offsets.copy()
    exchange_kernels.adopt(by_pass[0], agreed, by_pass[1], state)
    exchange_kernels.adopt_listed(v, agreed, offsets, state, own, own.size, summed)
    np.testing.assert_array_equal(v, agreed)
    np.testing.assert_array_equal(v, by_pass[0])
    np.testing.assert_array_equal(offsets, by_pass[1])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=40),
    st.integers(1, 3),
)
def test_all_finite_agrees_with_numpy_on_strided_weights(values, stride):
    pairs = np.zeros((len(values), stride))
    pairs[:, 0] = values  # the weights between their offsets, as a fit lays them out
    assert kernels.all_finite(pairs[:, 0]) == bool(np.isfinite(pairs[:, 0]).all())
