from pathlib import Path

import pytest
from mpirun import run_mpi

pytestmark = pytest.mark.usefixtures("compiled_kernels")


@pytest.mark.parametrize(
    ("nprocs", "wait"),
    [
        (1, "auto"),
        (2, "auto"),
        (3, "auto"),
        (4, "auto"),
        (8, "auto"),
        (2, "nap"),
    ],
)
def test_every_algorithm_equals_mpi_allreduce(nprocs, wait):
    # "auto" polls at P <= 2 on this 2-core machine and naps beyond: both ways are covered;
    # eight ranks check float64 only (the wire moves float32 alike on fewer)
    result = run_mpi("check_allreduce.py", nprocs, wait, timeout=300)
    for rank in range(nprocs):
        assert "FAIL" not in result.stdout[rank], result.stdout[rank]
    assert result.stdout[0].splitlines()[-1] == f"cases {1500 if nprocs <= 4 else 780}"


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_disagreeing_ranks_all_raise(nprocs):
    result = run_mpi("check_errors.py", nprocs, timeout=60)
    for rank in range(nprocs):
        lines = result.stdout[rank].splitlines()
        assert len(lines) == 17, result.report()
        assert all(line.startswith("ok") for line in lines), result.report()
        assert lines[-1] == "ok after True"


@pytest.mark.parametrize("nprocs", [1, 3, 4])
def test_allgather_returns_every_ranks_vector(nprocs):
    result = run_mpi("check_allgather.py", nprocs, timeout=120)
    assert result.stdout[0].splitlines() == ["done"], result.report()


def test_a_killed_job_leaves_no_shared_memory_in_dev_shm():
    # MPICH unlinks its files at the end of a job that ends well; after the first
    # collective they are unlinked already, so that no rank needs to live to the end
    result = run_mpi("killed_rank.py", 2, timeout=60, check=False, abort_on_error=False)
    assert result.returncode != 0, result.report()
    mapped = result.stdout[0].split()
    assert mapped, result.report()  # MPICH made shared memory (unlinked: "(deleted)")
    assert not [name for name in mapped if Path(name).exists()]


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("fit", "MemoryError: no room for the values received"),
        ("overlap", "MemoryError: no room for the values received"),
        ("wait", "Exception: "),
    ],
)
def test_a_rank_that_fails_inside_a_collective_ends_the_job(mode, error):
    # the other rank waits for rank 1 inside the call, where no error reaches it: rank 1
    # must end the job (it would otherwise wait for the other in collectives.check, and
    # both forever); run as users run it, plain python under mpiexec
    before = set(Path("/dev/shm").glob("mpich_shm_*"))
    result = run_mpi(
        "fail_inside_collective.py", 2, mode, timeout=60, check=False, abort_on_error=False
    )
    assert set(Path("/dev/shm").glob("mpich_shm_*")) <= before  # MPICH's, unlinked
    assert result.returncode != 0, result.report()
    assert "returned" not in "".join(result.stdout), result.report()
    assert (
        "collectives: rank 1 of 2 failed inside an allreduce that every rank had agreed to "
        f"run ({error}"
    ) in result.stderr[1], result.report()
