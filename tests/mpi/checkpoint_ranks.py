"""Checkpoints over the ranks of COMM_WORLD; every rank prints one JSON line.

Arguments: DIR ACTION. Actions: "save N" (N checkpoints; rank r's arrays hold r and the
checkpoint's number), "load" (what latest returns on this rank), "fail" (one checkpoint,
then one that rank 1 cannot write: each rank prints what it raised, then what latest
finds).
"""

import json
import sys
import warnings

import numpy as np
from mpi4py import MPI

from sparcml_apps.training import checkpoint

comm = MPI.COMM_WORLD
directory, action = sys.argv[1], sys.argv[2]


def arrays(number):
    return {"w": np.arange(comm.rank + 3, dtype=np.float64) * number, "rank": np.array(comm.rank)}


if action == "save":
    for number in range(1, int(sys.argv[3]) + 1):
        checkpoint.save(directory, arrays(number), {"number": number, "rank": comm.rank}, comm)
    print(json.dumps({"saved": int(sys.argv[3])}))
elif action == "load":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            found = checkpoint.latest(directory, comm)
        except ValueError as exc:
            print(json.dumps({"error": str(exc)}))
            sys.exit()
    print(
        json.dumps(
            {
                "number": found.number,
                "arrays": {name: array.tolist() for name, array in found.arrays.items()},
                "metadata": found.metadata,
                "skipped": found.skipped,
                "warnings": [str(w.message) for w in caught],
            }
        )
    )
elif action == "fail":
    checkpoint.save(directory, arrays(1), None, comm)
    savez = np.savez
    if comm.rank == 1:
        np.savez = lambda *args, **kwargs: exec("raise OSError(122, 'Disk quota exceeded')")
    try:
        checkpoint.save(directory, arrays(2), None, comm)
    except Exception as exc:  # noqa: BLE001 - the test reads what each rank raised
        error = f"{type(exc).__name__}: {exc}"
    else:
        error = None
    np.savez = savez
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", checkpoint.CheckpointWarning)
        found = checkpoint.latest(directory, comm)
    print(json.dumps({"error": error, "number": found.number, "skipped": found.skipped}))
