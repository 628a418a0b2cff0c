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
    assert result.stdout[0].splitlines()[-1] == f"cases {1440 if nprocs <= 4 else 720}"


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
