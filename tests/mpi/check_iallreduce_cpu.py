"""CPU use of a rank waiting for an allreduce that the other ranks join late.

Rank 0 starts the call and waits; the others sleep ``DELAY`` seconds first. Rank 0 prints
``cpu <fraction of one core>`` over its wait (all its threads). The call is an
``iallreduce``; with the argument ``nap`` a blocking ``allreduce`` whose ranks nap
while they wait (as on a node with more ranks than cores); with ``wait``, MPI's own
``Iallreduce`` of the dense vectors, waited for by :func:`collectives.wait` as on such a node.
"""

import sys
import time

import numpy as np
from mpi4py import MPI

from collectives import SparseVector, allreduce, iallreduce, thresholds, wait

DELAY = 2.0
comm = MPI.COMM_WORLD
if sys.argv[1:] == ["nap"]:
    thresholds.WAIT = "nap"

    def call(vec, **options):
        return allreduce(vec, comm, **options)
elif sys.argv[1:] == ["wait"]:
    thresholds.WAIT = "nap"

    def call(vec, **options):
        total = vec.to_dense()
        wait(comm.Iallreduce(MPI.IN_PLACE, total, op=MPI.SUM), comm)
        return total
else:

    def call(vec, **options):
        return iallreduce(vec, comm, **options).wait()


vec = SparseVector(np.arange(comm.rank, 1000, 3), np.ones(len(range(comm.rank, 1000, 3))), 1000)
call(vec)  # the channel (and the iallreduce thread) exist before the measurement
comm.Barrier()
if comm.rank == 0:
    wall, cpu = time.perf_counter(), time.process_time()
    result = call(vec, out="dense")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"cpu {cpu / wall:.4f} wall {wall:.3f}", flush=True)
else:
    time.sleep(DELAY)
    result = call(vec, out="dense")
expected = np.zeros(1000)
for r in range(comm.size):
    expected[r::3] += 1
assert np.array_equal(result, expected)
