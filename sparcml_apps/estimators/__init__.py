"""scikit-learn estimators trained by mini-batch SGD over sparse allreduce.

Where ``fit`` runs follows from what it is given (:mod:`sparcml_apps.backends`): in this
process (``MPI.COMM_SELF``, the default); on the ranks of ``comm`` when every rank of an
``mpiexec`` job calls ``fit`` with its own rows (SPMD); on ``n_jobs`` local worker
processes, an MPI job of their own kept for the next fits (:mod:`sparcml_apps.jobs`); on
the workers of a Dask cluster when ``X`` is a Dask array (:mod:`sparcml_apps.cluster`).
The estimator checks the call, hands the backend a :class:`FitTask` of it and takes what
it fitted. The parameters are declared once, in :mod:`.options`.
"""

from ._base import EARLY_STOPPING_ROWS, SIGNIFICANCE, SPARSE_INTERCEPT_DECAY
from ._classifier import SparseSGDClassifier
from ._regressor import SparseSGDRegressor
from ._task import FitTask

__all__ = [
    "EARLY_STOPPING_ROWS",
    "SIGNIFICANCE",
    "SPARSE_INTERCEPT_DECAY",
    "FitTask",
    "SparseSGDClassifier",
    "SparseSGDRegressor",
]
