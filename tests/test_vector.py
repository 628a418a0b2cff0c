import numpy as np
import pytest

from collectives import SparseVector


def test_from_dense_round_trip():
    dense = np.array([0.0, 1.5, 0.0, -2.0, 0.0], np.float32)
    vec = SparseVector.from_dense(dense)
    assert vec.indices.dtype == np.uint32
    assert vec.indices.tolist() == [1, 3]
    assert vec.values.tolist() == [1.5, -2.0]
    assert vec.nnz == 2 and vec.size == 5 and vec.density == pytest.approx(0.4)
    np.testing.assert_array_equal(vec.to_dense(), dense)
    assert vec.to_dense().dtype == np.float32


def test_index_dtype_follows_size():
    assert SparseVector([1], [1.0], 2**32 - 1).indices.dtype == np.uint32
    assert SparseVector([1], [1.0], 2**32).indices.dtype == np.uint64
    assert SparseVector([2**40], [1.0], 2**41).indices[0] == 2**40


def test_empty_vector():
    vec = SparseVector.empty(10, np.float32)
    assert vec.nnz == 0 and vec.dtype == np.float32
    assert SparseVector.empty(0).density == 0.0
    np.testing.assert_array_equal(vec.to_dense(), np.zeros(10, np.float32))


@pytest.mark.parametrize(
    ("indices", "values", "size", "error", "fragment"),
    [
        ([3, 1], [1.0, 2.0], 5, ValueError, "sorted and unique, got 3 then 1"),
        ([1, 1], [1.0, 2.0], 5, ValueError, "sorted and unique"),
        ([1, 5], [1.0, 2.0], 5, ValueError, "below size 5, got 5"),
        ([-1, 2], [1.0, 2.0], 5, ValueError, "non-negative, got -1"),
        ([1, 2], [1.0], 5, ValueError, "2 indices and 1 values"),
        ([1.5], [1.0], 5, TypeError, "indices must be integers"),
        ([1], np.ones(1, np.int64), 5, TypeError, "float32 or float64, got dtype int64"),
        ([1], np.ones(1, np.float16), 5, TypeError, "float32 or float64"),
        ([[1]], [[1.0]], 5, ValueError, "must be 1-D"),
        ([1], [1.0], -1, ValueError, "size must be a non-negative integer, got -1"),
        ([1], [1.0], 5.0, ValueError, "size must be a non-negative integer"),
        ([1], [1.0], True, ValueError, "size must be a non-negative integer"),
    ],
)
def test_invalid_input_is_named(indices, values, size, error, fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(")):
        SparseVector(np.asarray(indices), values, size)


def test_from_dense_rejects_bad_arrays():
    with pytest.raises(TypeError, match="array must be float32 or float64"):
        SparseVector.from_dense(np.arange(3))
    with pytest.raises(ValueError, match="array must be 1-D"):
        SparseVector.from_dense(np.ones((2, 2)))
