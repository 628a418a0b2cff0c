"""Measure the cost model's constants on a communicator.

Latency and inverse bandwidth come from the message pattern of the split algorithms: every
rank sends ``m`` bytes to every other rank at once, through the same channel and waits as
the collectives, for a few ``m``; a line through the slowest rank's times gives seconds
per message and per byte. The compute constants time the merge kernel and a dense sum.
"""

import time

import numpy as np
from mpi4py import MPI

from ._allreduce import channel
from ._kernels import merge_add

MESSAGE_BYTES = (0, 2**14, 2**17, 2**20, 2**22)
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


def calibrate(comm=None, *, repeat=5):
    """Measure ``alpha``, ``beta``, ``gamma`` and ``dense_gamma`` on ``comm`` (every rank
    calls it; all get the same dict). One rank sends no messages: alpha and beta are then
    None."""
    chan = channel(comm)
    nprocs = chan.comm.Get_size()
    rng = np.random.default_rng(0)
    n = 2**20
    a, b = (np.sort(rng.choice(8 * n, n, replace=False)).astype(np.uint32) for _ in range(2))
    values = rng.standard_normal(n).astype(np.float32)
    dense = np.zeros(8 * n, np.float32)
    result = {
        "alpha": None,
        "beta": None,
        "gamma": _local_seconds(lambda: merge_add(a, values, b, values), repeat) / (2 * n),
        "dense_gamma": _local_seconds(lambda: np.add(dense, dense, out=dense), repeat) / dense.size,
    }
    if nprocs > 1:
        peers = nprocs - 1
        seconds = np.array([_exchange_seconds(chan, m, repeat) for m in MESSAGE_BYTES])
        features = np.array([[peers, peers * m] for m in MESSAGE_BYTES], np.float64)
        # relative errors: the small messages weigh as much as the large
        fit = np.linalg.lstsq(features / seconds[:, None], np.ones(len(seconds)), rcond=None)
        alpha, beta = fit[0]
        result["alpha"] = max(float(alpha), 1e-8)
        result["beta"] = max(float(beta), 1e-13)
    # every rank computed from the same slowest times: the same dict everywhere
    result["gamma"] = _slowest(chan.comm, result["gamma"])
    result["dense_gamma"] = _slowest(chan.comm, result["dense_gamma"])
    return result
