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

    The buffers the sparse collectives send and receive: indices are ``uint32`` when
    ``size < 2**32``, else ``uint64``; values are float32 or float64. Entries not stored
    are zero.

    Parameters
    ----------
    indices : array_like of int
        The positions of the stored entries: 1-D, non-negative, below ``size``, sorted and
        unique. Converted to ``uint32`` when ``size < 2**32``, else ``uint64``.
    values : array_like of float
        The entries at ``indices``, as many: a float32 or float64 ndarray (kept, not
        copied, when contiguous), or a list, which becomes float64.
    size : int
        The length of the vector, from 0 to ``2**64 - 1``.
    check : bool, default True
        Validate and convert the arguments. Pass False only for indices already known to
        be valid and of the index dtype: all three are then stored as given.

    Attributes
    ----------
    indices : ndarray of uint32 or uint64
        The sorted unique positions of the stored entries.
    values : ndarray of float32 or float64
        The stored entries, one per index.
    size : int
        The length of the vector.

    Raises
    ------
    ValueError
        If ``size`` is not a non-negative integer below ``2**64``, ``indices`` or
        ``values`` is not 1-D, their lengths differ, or an index is negative, not below
        ``size``, or not greater than the one before it.
    TypeError
        If ``values`` is not float32 or float64, or ``indices`` are not integers.

    See Also
    --------
    SparseVector.from_dense : The nonzero entries of a dense array.
    allreduce : The sum of one vector from every rank.

    Examples
    --------
    >>> import numpy as np
    >>> from collectives import SparseVector
    >>> vec = SparseVector([1, 4], np.array([0.5, -2.0], np.float32), 6)
    >>> vec
    SparseVector(size=6, nnz=2, dtype=float32)
    >>> vec.indices.dtype.name, vec.values.dtype.name
    ('uint32', 'float32')
    >>> vec.to_dense().tolist()
    [0.0, 0.5, 0.0, 0.0, -2.0, 0.0]
    >>> SparseVector([4, 1], [1.0, 1.0], 6)
    Traceback (most recent call last):
        ...
    ValueError: indices must be sorted and unique, got 4 then 1 at positions 0, 1
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
        """The nonzero entries of a 1-D float32 or float64 array.

        Parameters
        ----------
        array : ndarray of float32 or float64
            The dense vector (a list becomes float64). Entries equal to zero (``-0.0``
            too) are left out; NaN is kept.

        Returns
        -------
        SparseVector
            A vector of ``array.size`` entries, with values of ``array``'s dtype (copied).

        Raises
        ------
        TypeError
            If ``array`` is not float32 or float64.
        ValueError
            If ``array`` is not 1-D.

        Examples
        --------
        >>> import numpy as np
        >>> from collectives import SparseVector
        >>> vec = SparseVector.from_dense(np.array([0.0, 1.5, 0.0, -2.0]))
        >>> vec
        SparseVector(size=4, nnz=2, dtype=float64)
        >>> vec.indices.tolist(), vec.values.tolist()
        ([1, 3], [1.5, -2.0])
        """
        array = check_values(array, "array")
        indices = np.flatnonzero(array).astype(index_dtype(array.size), copy=False)
        return cls(indices, array[indices], array.size, check=False)

    @classmethod
    def empty(cls, size, dtype=np.float64):
        """A vector of ``size`` zeros: no stored entries.

        Parameters
        ----------
        size : int
            The length of the vector, from 0 to ``2**64 - 1``.
        dtype : {numpy.float64, numpy.float32}, default numpy.float64
            The dtype of the values.

        Returns
        -------
        SparseVector
            A vector with ``nnz == 0``.

        Raises
        ------
        ValueError
            If ``size`` is not a non-negative integer below ``2**64``.
        TypeError
            If ``dtype`` is not float32 or float64.

        Examples
        --------
        >>> import numpy as np
        >>> from collectives import SparseVector
        >>> SparseVector.empty(5, np.float32)
        SparseVector(size=5, nnz=0, dtype=float32)
        """
        size = _check_size(size)
        dtype = np.dtype(dtype)
        if dtype not in VALUE_DTYPES:
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        return cls(np.empty(0, index_dtype(size)), np.empty(0, dtype), size, check=False)

    @property
    def nnz(self):
        """The number of stored entries.

        Examples
        --------
        >>> from collectives import SparseVector
        >>> SparseVector([0, 7], [1.0, 2.0], 10).nnz
        2
        """
        return self.indices.size

    @property
    def density(self):
        """Stored entries over size (0.0 for a vector of size 0).

        Examples
        --------
        >>> from collectives import SparseVector
        >>> SparseVector([0, 7], [1.0, 2.0], 10).density
        0.2
        """
        return self.nnz / self.size if self.size else 0.0

    @property
    def dtype(self):
        """The dtype of the values: float32 or float64.

        Examples
        --------
        >>> import numpy as np
        >>> from collectives import SparseVector
        >>> SparseVector([3], np.array([1.0], np.float32), 10).dtype.name
        'float32'
        """
        return self.values.dtype

    @property
    def nbytes(self):
        """The bytes of indices and values together.

        Examples
        --------
        >>> import numpy as np
        >>> from collectives import SparseVector
        >>> SparseVector([0, 7], np.array([1.0, 2.0], np.float32), 10).nbytes  # 2 * (4 + 4)
        16
        """
        return self.indices.nbytes + self.values.nbytes

    def to_dense(self):
        """The vector as a dense 1-D array.

        Returns
        -------
        ndarray
            A new array of ``size`` entries and the dtype of the values, zero where no
            entry is stored.

        Examples
        --------
        >>> from collectives import SparseVector
        >>> SparseVector([1, 2], [0.5, -1.0], 4).to_dense().tolist()
        [0.0, 0.5, -1.0, 0.0]
        """
        dense = np.zeros(self.size, self.values.dtype)
        dense[self.indices] = self.values
        return dense

    def __repr__(self):
        return f"SparseVector(size={self.size}, nnz={self.nnz}, dtype={self.values.dtype.name})"
