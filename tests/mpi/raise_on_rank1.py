"""Rank 1 raises while the others wait in a barrier: the job must end, not hang."""

from mpi4py import MPI

import collectives

collectives.check(comm=MPI.COMM_WORLD)  # after which the job leaves nothing in /dev/shm
if MPI.COMM_WORLD.rank == 1:
    raise ValueError("rank 1 cannot go on")
MPI.COMM_WORLD.Barrier()
