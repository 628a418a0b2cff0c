"""Arrays as the estimators take them, wherever the fit runs."""


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
    """
    if type(X).__module__.split(".")[0] == "sparse" and hasattr(X, "todense"):
        return X.to_scipy_sparse().tocsr() if X.ndim == 2 else X.todense()
    return X
