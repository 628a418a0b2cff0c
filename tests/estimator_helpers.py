"""Callbacks the MPI tests hand to estimators (importable by worker processes)."""

import os
import sys
import time
from pathlib import Path


def fail_on_rank1_at_epoch2(estimator, record):
    if estimator.comm.Get_rank() == 1 and record["epoch"] == 2:
        raise RuntimeError("rank 1 gives up at epoch 2")


def fail_on_rank1_as_rank0_waits(estimator, record):
    """After epoch 1, rank 1 raises while rank 0 waits in an MPI barrier that rank 1 never
    enters: rank 0 never learns of the error from the other ranks."""
    if record["epoch"] != 1:
        return
    if estimator.comm.Get_rank() == 1:
        raise RuntimeError("rank 1 gives up at epoch 1")
    estimator.comm.Barrier()


def stop_at_epoch2(estimator, record):
    """Every rank raises after epoch 2."""
    if record["epoch"] == 2:
        raise RuntimeError("stopped at epoch 2")


def exit_on_rank1_at_epoch2(estimator, record):
    if estimator.comm.Get_rank() == 1 and record["epoch"] == 2:
        print("rank 1 leaves at epoch 2", file=sys.stderr, flush=True)
        os._exit(5)


class PauseAfterEpoch1:
    """After epoch 1, every rank writes its pid to ``folder/rank<r>`` and waits (up to a
    minute) for a file ``folder/go``: a test can act on the ranks in the middle of a fit."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def __call__(self, estimator, record):
        if record["epoch"] != 1:
            return
        mine = self.folder / f"rank{estimator.comm.Get_rank()}"
        mine.with_suffix(".part").write_text(str(os.getpid()))
        mine.with_suffix(".part").rename(mine)
        deadline = time.monotonic() + 60
        while not (self.folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


class RecordPid:
    """After every epoch, every rank touches a file ``folder/<its pid>``: which processes
    fitted."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def __call__(self, estimator, record):
        (self.folder / str(os.getpid())).touch()


def run_out_of_memory_in_rank1s_next_exchange(estimator, record):
    """After epoch 1, rank 1 runs out of memory inside its next collective call, which the
    other ranks have agreed to run with it."""
    if record["epoch"] != 1 or estimator.comm.Get_rank() != 1:
        return
    from collectives import _algorithms

    def failing(*args):
        raise MemoryError("no room for the values received")
        yield

    for name in _algorithms.BY_NAME:
        _algorithms.BY_NAME[name] = failing
