"""Rank 1 is killed (SIGKILL) once the ranks have met in a first collective; then
``mpiexec`` kills the others. Rank 0 first prints the files of MPICH's shared memory that
it maps (one a line), which the killed job must not leave in ``/dev/shm``.
"""

import os
import signal
import time
from pathlib import Path

from mpi4py import MPI

import collectives

comm = MPI.COMM_WORLD
collectives.check(comm=comm)
if comm.rank == 0:
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5].startswith("/dev/shm/mpich_shm_"):
            print(fields[5], flush=True)
comm.Barrier()
if comm.rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
