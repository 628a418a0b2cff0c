import numbers

import numpy as np

VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def index_dtype(size):
    """``uint32`` for vectors shorter than 2**32 entries, else ``uint64``."""
    return np.dtype(np.uint32) if size < 2**32 else np.dtype(np.uint64)


def _check_size(size):
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
        raise ValueError(f"size must be a non-negative integer, got {size!r}")
    if size > 2**64 - 1:
        raise ValueError(f"size must be below 2**64, got {size}")
    return int(size)


def check_values(values, name="values"):
    """``values`` as a 1-D float32 or float64 array (lists become float64)."""
    if not isinstance(values, np.ndarray):
        values = np.asarray(values, dtype=np.float64)
    if values.dtype not in VALUE_DTYPES:
        raise TypeError(f"{name} must be float32 or float64, got dtype {values.dtype}")
    if values.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {values.shape}")
    return values


class SparseVector:
    """A vector of ``size`` entries held as sorted unique indices and their values.

    Indices are ``uint32`` when ``size < 2**32``, else ``uint64``; values are float32 or
    float64. Pass ``check=False`` only for indices already known to be valid.
    """

    __slots__ = ("indices", "values", "size")

    def __init__(self, indices, values, size, *, check=True):
        if not check:
            self.indices, self.values, self.size = indices, values, size
            return
        size = _check_size(size)
        values = check_values(values)
        indices = np.asarray(indices)
        if indices.ndim != 1:
            raise ValueError(f"indices must be 1-D, got shape {indices.shape}")
        if indices.size and indices.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {indices.dtype}")
        if indices.shape != values.shape:
            raise ValueError(
                f"indices and values must have the same length, got {indices.size} indices "
                f"and {values.size} values"
            )
        if indices.size:
            if indices.dtype.kind == "i" and indices[0] < 0:
                raise ValueError(f"indices must be non-negative, got {indices[0]}")
            if indices[-1] >= size:
                raise ValueError(f"indices must be below size {size}, got {indices[-1]}")
            if indices.size > 1 and not np.all(indices[1:] > indices[:-1]):
                first = int(np.flatnonzero(indices[1:] <= indices[:-1])[0])
                raise ValueError(
                    "indices must be sorted and unique, got "
                    f"{indices[first]} then {indices[first + 1]} at positions {first}, {first + 1}"
                )
        self.indices = np.ascontiguousarray(indices, dtype=index_dtype(size))
        self.values = np.ascontiguousarray(values)
        self.size = size

    @classmethod
    def from_dense(cls, array):
        """The nonzero entries of a 1-D float32 or float64 array."""
        array = check_values(array, "array")
        indices = np.flatnonzero(array).astype(index_dtype(array.size), copy=False)
        return cls(indices, array[indices], array.size, check=False)

    @classmethod
    def empty(cls, size, dtype=np.float64):
        """A vector of ``size`` zeros."""
        size = _check_size(size)
        dtype = np.dtype(dtype)
        if dtype not in VALUE_DTYPES:
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        return cls(np.empty(0, index_dtype(size)), np.empty(0, dtype), size, check=False)

    @property
    def nnz(self):
        """The number of stored entries."""
        return self.indices.size

    @property
    def density(self):
        """Stored entries over size (0 for an empty vector)."""
        return self.nnz / self.size if self.size else 0.0

    @property
    def dtype(self):
        """The dtype of the values."""
        return self.values.dtype

    @property
    def nbytes(self):
        """The bytes of indices and values together."""
        return self.indices.nbytes + self.values.nbytes

    def to_dense(self):
        """The vector as a dense 1-D array."""
        dense = np.zeros(self.size, self.values.dtype)
        dense[self.indices] = self.values
        return dense

    def __repr__(self):
        return f"SparseVector(size={self.size}, nnz={self.nnz}, dtype={self.values.dtype.name})"
