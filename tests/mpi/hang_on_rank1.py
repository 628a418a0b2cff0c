"""Rank 1 never joins the barrier; rank 2 fails loudly. The harness must not hang."""

import sys
import time

from mpi4py import MPI

import collectives

comm = MPI.COMM_WORLD
collectives.check(comm=comm)  # after which the killed job leaves nothing in /dev/shm
print("started", flush=True)
if comm.rank == 2:
    print("rank 2 gives up", file=sys.stderr, flush=True)
if comm.rank == 1:
    time.sleep(3600)
comm.Barrier()
