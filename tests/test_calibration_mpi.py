import pytest
from mpirun import run_mpi

pytestmark = pytest.mark.usefixtures("compiled_kernels")


@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_calibrate_measures_and_auto_reads_the_stored_record(nprocs, tmp_path):
    env = {"SPARCML_CALIBRATION": str(tmp_path / "calibration.json")}
    result = run_mpi("check_calibration.py", nprocs, env=env, timeout=120)
    for rank in range(nprocs):
        assert result.stdout[rank].splitlines() == ["done"], result.report()
