"""sparcml applications: estimators, training, cluster launch, datasets, benchmarks."""

from .estimators import SparseSGDClassifier, SparseSGDRegressor

__all__ = ["SparseSGDClassifier", "SparseSGDRegressor"]
