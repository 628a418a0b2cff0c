"""sparcml applications: estimators, training, cluster launch, datasets, benchmarks."""

__all__ = ["SparseSGDClassifier", "SparseSGDRegressor"]


def __getattr__(name):
    # the estimators import scikit-learn (about a second): only when asked for, so that
    # ``sparcml_apps.datasets`` loads a file without it
    if name in __all__:
        from . import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
