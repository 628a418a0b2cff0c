"""Arrays as the estimators take them, wherever the fit runs, and the blocks of rows the
ranks take."""

import numpy as np


def as_scipy(X):
    """pydata ``sparse`` arrays become scipy CSR (1-D ones dense); the rest is left alone.

    Parameters
    ----------
    X : array-like, scipy sparse matrix or pydata ``sparse`` array
        Rows, labels or weights as the user passed them.

    Returns
    -------
    array-like or scipy sparse matrix
        ``X`` itself, but for a pydata ``sparse`` array: a scipy CSR matrix (2-D) or a
        dense numpy array (1-D).

    Examples
    --------
    >>> import numpy as np
    >>> from sparcml_apps.inputs import as_scipy
    >>> X = np.eye(2)
    >>> as_scipy(X) is X  # numpy arrays and scipy matrices pass as they are
    True
    """
    if type(X).__module__.split(".")[0] == "sparse" and hasattr(X, "todense"):
        return X.to_scipy_sparse().tocsr() if X.ndim == 2 else X.todense()
    return X


def row_blocks(n_rows, n_blocks):
    """The ``n_blocks + 1`` boundaries of contiguous, nearly equal blocks of rows.

    Block ``r`` is the rows ``bounds[r]`` to ``bounds[r + 1]``: the rows rank ``r`` of
    ``n_blocks`` takes (of a synthetic :class:`Source`, or of a pool's fit,
    :mod:`sparcml_apps.jobs`).

    Parameters
    ----------
    n_rows : int
        The number of rows, 0 or more.
    n_blocks : int
        The number of blocks, 1 or more.

    Returns
    -------
    ndarray of shape (n_blocks + 1,)
        The boundaries, from 0 to ``n_rows``; blocks differ by one row at most.

    Examples
    --------
    >>> from sparcml_apps.inputs import row_blocks
    >>> row_blocks(10, 3)
    array([ 0,  3,  6, 10])
    >>> row_blocks(2, 3)
    array([0, 0, 1, 2])
    """
    return np.arange(n_blocks + 1) * n_rows // n_blocks
