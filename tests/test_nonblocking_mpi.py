import pytest
from mpirun import run_mpi

pytestmark = pytest.mark.usefixtures("compiled_kernels")


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_iallreduce_equals_allreduce_in_order_and_errors_reach_all(nprocs):
    result = run_mpi("check_iallreduce.py", nprocs, timeout=240)
    for rank in range(nprocs):
        assert "FAIL" not in result.stdout[rank], result.report()
    assert result.stdout[0].splitlines()[-1] == "cases 420"


@pytest.mark.parametrize(
    "nprocs, call", [(2, "iallreduce"), (3, "iallreduce"), (2, "nap"), (2, "wait")]
)
def test_a_waiting_rank_leaves_its_core(nprocs, call):
    # rank 0 waits 2 s for ranks that join late; its CPU time over that wait, all threads:
    # it yields its core for the first 50 ms, then naps ever longer (at 20 us each, it
    # would take a quarter of its core)
    result = run_mpi("check_iallreduce_cpu.py", nprocs, *([call] if call != "iallreduce" else []),
                     timeout=60)  # fmt: skip
    cpu = float(result.stdout[0].split()[1])
    assert cpu < 0.12, result.report()


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_quantized_allreduce_is_unbiased_bounded_and_small(nprocs):
    result = run_mpi("check_quantized.py", nprocs, timeout=240)
    for rank in range(nprocs):
        assert "FAIL" not in result.stdout[rank], result.report()
    if nprocs > 1:
        ratio = float(result.stdout[0].splitlines()[0].split()[-1])
        assert ratio <= 0.2
