"""Measure the cost model's constants on a communicator.

Two kinds of timings, through the same channel and waits as the collectives: every rank
sending ``m`` bytes to every other at once (messages and bytes only), and each algorithm on
random vectors. The constants are those with which the model predicts all of them best,
so ``auto`` ranks the algorithms as this machine, its network and this implementation do.
"""

import time

import numpy as np
from mpi4py import MPI

from . import cost_model
from ._allreduce import allreduce, channel
from ._kernels import merge_add
from ._vector import SparseVector
from .cost_model import ALGORITHMS

MESSAGE_BYTES = (0, 2**14, 2**17, 2**20, 2**22)
"""The sizes of the messages every rank sends to every other at once, timed."""
GRID_SIZES = (2**19, 2**21, 2**23)
"""The vector sizes each algorithm is timed on, by default."""
GRID_DENSITIES = (0.0003, 0.003, 0.03, 0.2)
"""The densities (nonzeros per rank over size) each algorithm is timed at, by default."""
_TAG = 0


def _swap(wire, nbytes):
    send = np.zeros(nbytes, np.uint8)
    received = [np.empty(nbytes, np.uint8) for _ in range(wire.size)]
    requests = []
    for shift in range(1, wire.size):
        peer = (wire.rank + shift) % wire.size
        requests += [wire.isend(send, peer, _TAG), wire.irecv(received[peer], peer, _TAG)]
    yield requests


def _slowest(comm, seconds):
    return comm.allreduce(seconds, MPI.MAX)


def _exchange_seconds(chan, nbytes, repeat):
    times = []
    for _ in range(repeat + 1):  # the first one warms up
        chan.comm.Barrier()
        begin = time.perf_counter()
        chan.run(_swap(chan.wire(), nbytes))
        times.append(_slowest(chan.comm, time.perf_counter() - begin))
    return float(np.median(times[1:]))


def _local_seconds(call, repeat):
    call()
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        call()
        times.append(time.perf_counter() - begin)
    return float(np.median(times))


def _algorithm_seconds(chan, vec, algorithm, repeat):
    """Least over ``repeat`` runs of the slowest rank's time (other work only adds time)."""
    allreduce(vec, chan.comm, algorithm=algorithm)
    times = []
    for _ in range(repeat):
        chan.comm.Barrier()
        begin = time.perf_counter()
        allreduce(vec, chan.comm, algorithm=algorithm)
        times.append(_slowest(chan.comm, time.perf_counter() - begin))
    return min(times)


def _features(algorithm, nprocs, size, nnz):
    """What the model multiplies each constant by: a prediction with that constant 1."""
    row = []
    for name in cost_model.NAMES:
        unit = dict.fromkeys(cost_model.NAMES, 0.0)
        unit[name] = 1.0
        row.append(cost_model.predict(algorithm, nprocs, size, nnz, **unit).seconds)
    return row


def _nonnegative_fit(features, seconds):
    """The non-negative constants that minimize the relative errors of the model: least
    squares over every subset of constants left free (four: sixteen small solves)."""
    a = np.asarray(features) / np.asarray(seconds)[:, None]
    b = np.ones(len(seconds))
    best, best_error = np.zeros(a.shape[1]), np.inf
    for subset in range(1, 2 ** a.shape[1]):
        free = [j for j in range(a.shape[1]) if subset >> j & 1]
        solution = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        if np.any(solution < 0):
            continue
        constants = np.zeros(a.shape[1])
        constants[free] = solution
        error = float(np.sum((a @ constants - b) ** 2))
        if error < best_error:
            best, best_error = constants, error
    return best


def calibrate(comm=None, *, repeat=5, sizes=GRID_SIZES, densities=GRID_DENSITIES):
    """Measure ``alpha``, ``beta``, ``gamma`` and ``dense_gamma`` on ``comm``.

    A collective: every rank calls it; all get the same dict. Times every rank sending
    ``MESSAGE_BYTES`` (0 to 4 MiB) to every other at once, and every algorithm on random
    vectors of ``sizes`` and ``densities`` (nonzeros per rank), then fits the model's
    constants to all those times (relative errors, constants non-negative). One rank sends
    no messages: alpha and beta are then None, and the compute constants come from timing
    the merge kernel and a dense sum. Nothing is stored: :func:`cost_model.store` keeps the
    result for later runs.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm, optional
        The communicator; None (the default) means ``MPI.COMM_WORLD``.
    repeat : int, default 5
        Timed runs of each measurement, after one to warm up: the median of the exchanges
        and the least of the algorithms count (each run's slowest rank), and on one rank
        the median of the kernels.
    sizes : sequence of int, default (2**19, 2**21, 2**23)
        The vector sizes the algorithms are timed on.
    densities : sequence of float, default (0.0003, 0.003, 0.03, 0.2)
        The fractions of each vector that every rank holds nonzero.

    Returns
    -------
    dict
        ``{"alpha": ..., "beta": ..., "gamma": ..., "dense_gamma": ...}`` (the keys of
        :data:`cost_model.NAMES`): floats, in seconds per message, per byte sent, per entry
        merged and per dense element; alpha and beta None on one rank.

    Raises
    ------
    TypeError
        If ``comm`` is not an mpi4py ``Intracomm``.

    See Also
    --------
    cost_model.store : Keep the constants for the collectives of later runs.
    cost_constants : The constants the collectives use on a communicator.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from collectives import calibrate
    >>> constants = calibrate(MPI.COMM_SELF, repeat=1)
    >>> list(constants)
    ['alpha', 'beta', 'gamma', 'dense_gamma']
    >>> constants["alpha"], constants["beta"]  # one rank sends no messages
    (None, None)
    >>> constants["gamma"] > 0
    True
    """
    chan = channel(comm)
    nprocs, rank = chan.comm.Get_size(), chan.comm.Get_rank()
    if nprocs == 1:
        return {"alpha": None, "beta": None, **_kernel_constants(repeat)}
    features, seconds = [], []
    for nbytes in MESSAGE_BYTES:
        features.append([nprocs - 1, (nprocs - 1) * nbytes, 0.0, 0.0])
        seconds.append(_exchange_seconds(chan, nbytes, repeat))
    for size in sizes:
        for density in densities:
            rng = np.random.default_rng([rank, size])
            nnz = int(density * size)
            indices = np.sort(rng.choice(size, nnz, replace=False))
            vec = SparseVector(indices, rng.standard_normal(nnz).astype(np.float32), size)
            for algorithm in ALGORITHMS:
                features.append(_features(algorithm, nprocs, size, nnz))
                seconds.append(_algorithm_seconds(chan, vec, algorithm, repeat))
    # every rank fits the same slowest times: the same constants everywhere
    fitted = _nonnegative_fit(features, seconds)
    return {name: float(value) for name, value in zip(cost_model.NAMES, fitted, strict=True)}


def _kernel_constants(repeat):
    rng = np.random.default_rng(0)
    n = 2**20
    a, b = (np.sort(rng.choice(8 * n, n, replace=False)).astype(np.uint32) for _ in range(2))
    values = rng.standard_normal(n).astype(np.float32)
    dense = np.zeros(8 * n, np.float32)
    return {
        "gamma": _local_seconds(lambda: merge_add(a, values, b, values), repeat) / (2 * n),
        "dense_gamma": _local_seconds(lambda: np.add(dense, dense, out=dense), repeat) / dense.size,
    }
