import time

import pytest
from mpirun import run_mpi


def test_a_hung_job_is_killed_and_every_rank_reported():
    begin = time.monotonic()
    with pytest.raises(AssertionError) as failure:
        run_mpi("hang_on_rank1.py", 3, timeout=5)
    assert time.monotonic() - begin < 30
    report = str(failure.value)
    assert "did not finish in 5 s" in report
    assert "--- rank 2 stderr\nrank 2 gives up" in report
    assert report.count("started") == 3


def test_an_uncaught_exception_ends_every_rank():
    begin = time.monotonic()
    result = run_mpi("raise_on_rank1.py", 3, timeout=60, check=False)
    assert time.monotonic() - begin < 30
    assert result.returncode != 0
    assert "ValueError: rank 1 cannot go on" in result.stderr[1]
