import signal

import pytest

# A suite started in the background of a non-interactive shell (`make test &`) inherits
# SIGINT ignored, and so would every process the tests start to interrupt with Ctrl+C:
# they start with Python's handler instead (a handled signal is reset to the default at exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile (or load from numba's cache) the kernels once, before ranks race to do it:
    those of fits, of the collectives, of the parser and of the generator, on two ranks
    (tests/mpi/warm_kernels.py)."""
    from mpirun import run_mpi

    run_mpi("warm_kernels.py", 2, timeout=600)


@pytest.fixture
def no_pools():
    """No ``n_jobs`` pool runs when the test begins, and none is left when it ends."""
    from sparcml_apps import jobs

    jobs.close()
    yield
    jobs.close()
