"""collectives.calibrate on every rank, and auto following a stored calibration.

Run under ``mpiexec -n P`` with ``SPARCML_CALIBRATION`` naming a file that does not exist
yet. Prints ``FAIL ...`` per failure and ``done``.
"""

import numpy as np
from mpi4py import MPI

from collectives import SparseVector, Stats, allreduce, calibrate, cost_model

comm = MPI.COMM_WORLD
failures = []
measured = calibrate(comm, repeat=2, sizes=(2**12, 2**15), densities=(0.01, 0.3))
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

# a few nonzeros: auto sums them sparse by the module's constants ...
vec = SparseVector(
    np.arange(comm.rank, 40, comm.size), np.ones(len(range(comm.rank, 40, comm.size))), 4096
)


def chosen(communicator):
    stats = Stats()
    allreduce(vec, communicator, stats=stats)
    return stats.algorithm


before = chosen(comm)
# ... and dense once the stored constants make merging dear and dense work free (zero is a
# constant too, not a missing one); rank 0 alone reads the file
if comm.rank == 0:
    cost_model.store({"alpha": 1e-3, "beta": 0.0, "gamma": 1.0, "dense_gamma": 0.0}, comm.size)
after = chosen(comm.Dup())
if comm.size > 1 and (before == "dense" or after != "dense"):
    failures.append(f"auto chose {before} by default and {after} after calibration")
if chosen(comm) != before:
    failures.append("a communicator made before the calibration changed its choice")
for line in failures:
    print("FAIL", line)
print("done")
