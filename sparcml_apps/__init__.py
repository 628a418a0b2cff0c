"""sparcml applications: estimators, training, cluster launch, datasets, benchmarks."""
