"""A fit as every rank runs it, once the estimator has checked the data and agreed on the
setup: the :class:`Plan` of one rank (its rows, the setup, the weights to start from, how
long to train) and what :func:`run` returns, the :class:`Trained` model. A plan holds no
estimator: a process that runs one needs this package, not scikit-learn."""

import dataclasses
import functools
from dataclasses import dataclass

import scipy.sparse as sp

import collectives

from . import checkpoint, memory
from .loop import train
from .state import Setup, Weights


@dataclass
class Plan:
    """What one rank trains on and how.

    Parameters
    ----------
    setup : Setup
        The options of the training, the same on every rank.
    weights : Weights
        The weights to start from, the same on every rank (:func:`run` trains them).
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        This rank's rows (none on some ranks, when others hold rows).
    y : ndarray of shape (n_rows,)
        Their targets as the kernels take them: +1 or -1 for two classes, the class's
        number for more, the value for a regressor.
    row_weight : ndarray of shape (n_rows,)
        The weight of each row.
    held : ndarray of bool of shape (n_rows,) or None
        The rows held out to stop early on their score (None: stop on the loss).
    max_epochs : int
        Epochs at most.
    check_convergence : bool
        Whether to stop once the loss or the score stops improving (``tol``).
    significance : float
        Standard errors a held-out score's rise must pass to count (0: ``tol`` alone).
    checkpoint : tuple or None
        ``(folder, seconds, options, resume)``: save a checkpoint in ``folder`` every
        ``seconds`` (:class:`~.checkpoint.Checkpoints`, for a run of these ``options``),
        and whether to resume from the last one there. None: no checkpoints.
    report : callable or None
        ``report(record, weights, comm)`` after every epoch (the estimator's ``callback``).
    """

    setup: Setup
    weights: Weights
    X: object
    y: object
    row_weight: object
    held: object = None
    max_epochs: int = 1
    check_convergence: bool = True
    significance: float = 0.0
    checkpoint: tuple | None = None
    report: object = None

    def blocks(self, bounds):
        """The plan of each rank when rank ``r`` holds rows ``bounds[r]:bounds[r + 1]``:
        the same setup and weights, a block of the rows each.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from sparcml_apps.training.plan import Plan
        >>> plan = Plan(None, None, sp.eye(5, format="csr"), np.ones(5), np.ones(5))
        >>> [part.X.shape[0] for part in plan.blocks([0, 3, 5])]
        [3, 2]
        """
        return [
            dataclasses.replace(
                self,
                X=_rows(self.X, start, stop),
                y=self.y[start:stop],
                row_weight=self.row_weight[start:stop],
                held=None if self.held is None else self.held[start:stop],
            )
            for start, stop in zip(bounds[:-1], bounds[1:], strict=True)
        ]


def _rows(X, start, stop):
    """Rows ``start:stop`` of the CSR matrix ``X``: views of its arrays but ``indptr`` (the
    constructor would copy views of a far larger array)."""
    first, last = X.indptr[start], X.indptr[stop]
    block = sp.csr_matrix((stop - start, X.shape[1]), dtype=X.dtype)
    block.data, block.indices = X.data[first:last], X.indices[first:last]
    block.indptr = X.indptr[start : stop + 1] - first
    return block


@dataclass
class Trained:
    """What :func:`run` returns, the same on every rank.

    Attributes
    ----------
    weights : Weights
        The training state, to go on from (``partial_fit``, ``warm_start``).
    coef : ndarray of shape (n_out, n_features)
        The model's weights (averaged, where the setup averages), in the rows' dtype.
    intercept : ndarray of shape (n_out,)
        Its intercepts, in the rows' dtype (the training state's own array, where that is
        it: copy it to keep it).
    history : list of Epoch
        One record each epoch.
    resumed_from : str or None
        The checkpoint the run resumed from.
    """

    weights: Weights
    coef: object
    intercept: object
    history: list
    resumed_from: str | None = None


def run(plan, comm, *, failing=None):
    """Train on every rank of ``comm``, each rank with its own :class:`Plan`.

    Every rank calls it (SPMD) and every rank returns the same :class:`Trained`. Whatever
    stops one rank raises on every rank (:func:`collectives.check`), once the others
    reach a collective of :mod:`collectives`; one that waits in another (an MPI call of
    a callback's) never does, and ``failing`` is how a rank can say so meanwhile.

    Parameters
    ----------
    plan : Plan
        This rank's plan.
    comm : mpi4py.MPI.Intracomm
        The ranks that train together.
    failing : callable, optional
        Called with the exception that stopped this rank, before the ranks agree on it.

    Returns
    -------
    Trained
        The model, its training state and the record of its epochs.
    """
    setup, weights, X = plan.setup, plan.weights, plan.X
    if plan.report is not None:
        setup = dataclasses.replace(setup, callback=functools.partial(plan.report, comm=comm))
    checkpoints = progress = resumed_from = None
    if plan.checkpoint is not None:
        folder, seconds, options, resume = plan.checkpoint
        data = checkpoint.fingerprint(X, plan.y, plan.row_weight)
        checkpoints = checkpoint.Checkpoints(folder, seconds, options, data)
        resumed = checkpoints.resume(comm) if resume else None
        if resumed is not None:
            weights, progress, resumed_from = resumed
    try:
        history = train(
            X,
            plan.y,
            plan.row_weight,
            setup,
            weights,
            comm,
            max_epochs=plan.max_epochs,
            check_convergence=plan.check_convergence,
            held=plan.held,
            significance=plan.significance,
            progress=progress,
            checkpoints=checkpoints,
            block_rows=memory.block_rows(X, setup.n_out * setup.n_features, comm),
        )
    except collectives.RankError:
        raise
    except Exception as exc:  # noqa: BLE001 - delivered to every rank
        if failing is not None:
            failing(exc)
        collectives.check(exc, comm)
    coef, intercept = weights.model(comm, average=setup.average, agree=True)
    weights.drop_agreed()
    resumed_from = None if resumed_from is None else str(resumed_from)
    coef, intercept = coef.astype(X.dtype, copy=False), intercept.astype(X.dtype, copy=False)
    return Trained(weights, coef, intercept, history, resumed_from)
