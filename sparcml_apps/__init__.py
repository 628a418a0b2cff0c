"""sparcml applications: estimators, training, cluster launch, datasets, benchmarks."""

__all__ = ["SparseSGDClassifier", "SparseSGDRegressor"]


def __getattr__(name):
    # the estimators (numba, scikit-learn, MPI) load on first use: command lines and
    # benchmark processes that do not train start without them
    if name in __all__:
        from . import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *__all__])
