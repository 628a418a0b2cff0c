"""Where a fit runs: one module a backend, each with one public function,

    ``fit(task, X, y, *, sample_weight=None)``

that fits ``task`` (a :class:`sparcml_apps.estimators.FitTask`: the call of ``fit`` or
``partial_fit`` as the estimator hands it over) on ``X`` and ``y`` and returns the task
whose estimator it fitted (the one given, or a copy that fitted elsewhere), through the
task's public methods only.

- :mod:`.in_process`: in this process alone (``MPI.COMM_SELF``), the default;
- :mod:`.communicator`: on the ranks of the estimator's ``comm``, every rank calling
  ``fit`` with its own rows (SPMD, under ``mpiexec``);
- :mod:`.pool`: on ``n_jobs`` local worker processes, an MPI job of their own kept for the
  next fits;
- :mod:`.dask_cluster`: on the workers of a Dask cluster (dask-mpi), ``X`` a Dask array.
"""
