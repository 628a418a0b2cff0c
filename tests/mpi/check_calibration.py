"""cost_model.calibrate on every rank, and auto following a stored calibration.

Run under ``mpiexec -n P`` with ``SPARCML_CALIBRATION`` naming a file that does not exist
yet. Prints ``FAIL ...`` per failure and ``done``.
"""

import numpy as np
from mpi4py import MPI

from collectives import SparseVector, Stats, allreduce, cost_model

comm = MPI.COMM_WORLD
failures = []
measured = cost_model.calibrate(comm, repeat=2, sizes=(2**12, 2**15), densities=(0.01, 0.3))
if comm.allgather(measured) != [measured] * comm.size:
    failures.append(f"ranks measured differently: {measured}")
for name in cost_model.NAMES:
    value = measured[name]
    if comm.size == 1 and name in ("alpha", "beta"):
        if value is not None:
            failures.append(f"one rank measured {name} {value}")
    elif not (isinstance(value, float) and 0 <= value < 1):
        failures.append(f"{name} = {value!r}")
if comm.size > 1 and not measured["alpha"] + measured["beta"] > 0:
    failures.append(f"messages cost nothing: {measured}")

# a dense half: auto sums it dense by the module's constants ...
vec = SparseVector.from_dense(np.random.default_rng(comm.rank).random(4096) * (np.arange(4096) % 2))


def chosen(communicator):
    stats = Stats()
    allreduce(vec, communicator, stats=stats)
    return stats.algorithm


before = chosen(comm)
# ... and sparse once the stored constants make dense work dear; rank 0 alone reads the file
if comm.rank == 0:
    cost_model.store({**measured, "dense_gamma": 1.0, "alpha": 1e-9}, comm.size)
after = chosen(comm.Dup())
if comm.size > 1 and (before != "dense" or after == "dense"):
    failures.append(f"auto chose {before} by default and {after} after calibration")
if chosen(comm) != before:
    failures.append("a communicator made before the calibration changed its choice")
for line in failures:
    print("FAIL", line)
print("done")
