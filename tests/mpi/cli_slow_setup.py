"""sparcml train where rank 1 takes SECONDS longer than rank 0 to make its estimator (as
a slower import of scikit-learn would): argv[1] is SECONDS, the rest the command line."""

import sys
import time

from mpi4py import MPI

from sparcml_apps.cli import train
from sparcml_apps.cli.main import main

SLOWER = float(sys.argv.pop(1))
made = train.estimator


def estimator(options, progress):
    if MPI.COMM_WORLD.Get_rank() == 1:
        time.sleep(SLOWER)
    return made(options, progress)


train.estimator = estimator
sys.exit(main())
