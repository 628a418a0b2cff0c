"""Fit every case of the divergence grid (its seeds) on the ranks, each holding a block of
the rows; rank 0 writes the scores (JSON) to argv[1]."""

import json
import sys
from pathlib import Path

from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).parents[1]))
import divergence_grid  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = divergence_grid.ROWS
rows = slice(rank * n // size, (rank + 1) * n // size)
scores = divergence_grid.scores(True, comm, rows)
if rank == 0:
    Path(sys.argv[1]).write_text(json.dumps(scores))
