"""The backend of ``n_jobs`` local worker processes: a pool, an MPI job of its own, kept for the
next fits.

The workers of a pool (:class:`Pool`; one for each number of workers, :func:`pool`) are
``mpiexec -n N python -m sparcml_apps.backends.pool._worker`` in a session of their own.
They start at the pool's first fit and stay: the next fits with as many workers (a refit, the
candidates and folds of a grid search, ``partial_fit`` calls, ``warm_start``) go to the
same processes. A pool ends on :meth:`Pool.close` (:func:`close` ends them all; ``with
pool(n):`` ends one on leaving), after :data:`limits.IDLE_SECONDS` without a fit, when a
fit on it fails, and when this interpreter exits, leaving no process, file or shared memory.
An estimator holds no pool (its ``n_jobs`` picks one at each fit): a clone or a pickle
carries none.

A fit is planned here, as a fit in this process checks its data and arguments (it
raises what that one raises) and as the ranks of ``mpiexec -n N`` with ``comm=`` agree on
their setup: a :class:`sparcml_apps.training.Plan` a worker, each with one contiguous
block of the rows (the block rank ``r`` takes, :func:`row_blocks`), so that the model is
that of ``mpiexec -n N``, bit for bit. The workers load the training code, not the
estimators nor scikit-learn. The rows go into memory that the pool keeps for its fits
and shares with its workers (as large as the largest one's rows; an unnamed file, in huge
pages where the machine gives them: :class:`._wire.Shelf`); each worker maps its block,
read-only and copy-on-write, and they train together over their ``COMM_WORLD``; worker 0
sends what it trained back, its arrays in shared memory too (sealed against writes).
Through the socket go control messages and the setup only (:mod:`._wire`).

Only this user can reach a pool: its socket lies in a folder only the owner may enter,
and each worker proves that it holds the pool's random key (a file there, mode 0600)
before anything it sends is unpickled; the shared memory is files without a name (mode
0600) passed over that socket.

This process never joins the MPI job, so nothing a worker does can end it. A failed fit
raises :class:`collectives.RankError` naming the worker's rank: an exception in a
worker, with its message (after :data:`limits.STRANDED_SECONDS` at most: the others
learn of it at their next exchange, or are killed); a worker
that dies (its socket closes), with how it ended (the signal that killed it, or its exit
code, as ``mpiexec`` reports); a worker that stops responding (it sends a heartbeat
every :data:`limits.HEARTBEAT_SECONDS` while it fits), after
:data:`limits.SILENCE_SECONDS`. On any failure, and on Ctrl-C, the pool is closed (every
worker killed and reaped) before the exception leaves; the next fit starts a new one.
What the workers print is copied to this process's ``sys.stdout`` and ``sys.stderr``.
"""

from ...inputs import row_blocks
from . import limits
from ._pool import Pool, close, fit, pool, workers

__all__ = ["Pool", "close", "fit", "limits", "pool", "row_blocks", "workers"]
