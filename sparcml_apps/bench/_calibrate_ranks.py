"""The ranks' side of ``calibrate``: ``mpiexec -n P python -m`` this module.

Every rank measures; rank 0 stores the constants and prints them as one JSON record.
"""

import argparse
import json

from mpi4py import MPI

import collectives
from collectives import cost_model


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", required=True)
    parser.add_argument("--repeat", type=int, required=True)
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    constants = collectives.calibrate(comm, repeat=args.repeat)
    if comm.rank == 0:
        cost_model.store(constants, comm.size, args.path)
        print(json.dumps({"nprocs": comm.size, **constants}), flush=True)


if __name__ == "__main__":
    main()
