"""Checkpoints over several ranks: each rank's part, completeness, agreement on damage."""

import json

import numpy as np
import pytest
from mpirun import run_mpi


def per_rank(result):
    return [json.loads(out) for out in result.stdout]


def expected_arrays(rank, number):
    return {"w": (np.arange(rank + 3, dtype=np.float64) * number).tolist(), "rank": rank}


@pytest.mark.parametrize("nprocs", [2, 3])
def test_every_rank_gets_its_own_part_of_the_newest_checkpoint(tmp_path, nprocs):
    run_mpi("checkpoint_ranks.py", nprocs, tmp_path, "save", 3, timeout=120)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-000002", "checkpoint-000003"]
    newest = tmp_path / "checkpoint-000003"
    parts = sorted(p.name for p in newest.iterdir())
    assert parts == ["COMPLETE"] + [f"rank-{r}.npz" for r in range(nprocs)]
    manifest = json.loads((newest / "COMPLETE").read_text())
    assert manifest["ranks"] == nprocs
    assert [p["bytes"] for p in manifest["parts"]] == [
        (newest / f"rank-{r}.npz").stat().st_size for r in range(nprocs)
    ]
    loaded = per_rank(run_mpi("checkpoint_ranks.py", nprocs, tmp_path, "load"))
    for rank, found in enumerate(loaded):
        assert found["number"] == 3 and found["skipped"] == [] and found["warnings"] == []
        assert found["arrays"] == expected_arrays(rank, 3)
        assert found["metadata"] == {"number": 3, "rank": rank}


def test_one_damaged_part_makes_every_rank_use_the_previous_checkpoint(tmp_path):
    run_mpi("checkpoint_ranks.py", 3, tmp_path, "save", 2, timeout=120)
    part = tmp_path / "checkpoint-000002" / "rank-1.npz"
    data = bytearray(part.read_bytes())
    data[-100] ^= 0xFF
    part.write_bytes(bytes(data))
    found = per_rank(run_mpi("checkpoint_ranks.py", 3, tmp_path, "load"))
    fault = f"{tmp_path / 'checkpoint-000002'}: rank-1.npz is corrupted: sha256"
    for rank, one in enumerate(found):
        assert one["number"] == 1 and one["arrays"] == expected_arrays(rank, 1)
        assert len(one["skipped"]) == 1 and one["skipped"][0].startswith(fault)
        # rank 0 warns, the others stay quiet
        assert [w.startswith(f"passing over checkpoint {fault}") for w in one["warnings"]] == (
            [True] if rank == 0 else []
        )


def test_a_rank_that_cannot_write_fails_the_save_on_every_rank(tmp_path):
    found = per_rank(run_mpi("checkpoint_ranks.py", 3, tmp_path, "fail", timeout=120))
    failed = tmp_path / "checkpoint-000002"
    assert [one["error"] for one in found] == [
        "RankError: rank 1 failed: OSError: [Errno 122] Disk quota exceeded",
        "OSError: [Errno 122] Disk quota exceeded",
        "RankError: rank 1 failed: OSError: [Errno 122] Disk quota exceeded",
    ]
    assert sorted(p.name for p in failed.iterdir()) == ["rank-0.npz", "rank-2.npz"]
    for one in found:
        assert one["number"] == 1
        assert one["skipped"] == [
            f"{failed}: incomplete: no COMPLETE manifest (the save did not finish)"
        ]


def test_a_checkpoint_of_other_ranks_is_refused(tmp_path):
    run_mpi("checkpoint_ranks.py", 3, tmp_path, "save", 1, timeout=120)
    for one in per_rank(run_mpi("checkpoint_ranks.py", 2, tmp_path, "load")):
        assert one == {
            "error": f"cannot resume from {tmp_path / 'checkpoint-000001'}: it was written by "
            "3 ranks, this run has 2"
        }
