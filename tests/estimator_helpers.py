"""Callbacks the MPI tests hand to estimators (importable by spawned processes)."""


def fail_on_rank1_at_epoch2(estimator, record):
    if estimator.comm.Get_rank() == 1 and record["epoch"] == 2:
        raise RuntimeError("rank 1 gives up at epoch 2")
