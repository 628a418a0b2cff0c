import signal

import numpy as np
import pytest

# A suite started in the background of a non-interactive shell (`make test &`) inherits
# SIGINT ignored, and so would every process the tests start to interrupt with Ctrl+C:
# they start with Python's handler instead (a handled signal is reset to the default at exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels(tmp_path_factory):
    """Compile (or load from numba's cache) the kernels once, before ranks race to do it:
    those of fits on two ranks (tests/mpi/warm_kernels.py) and, meanwhile, those of the
    collectives, the parser and the generator here."""
    from concurrent.futures import ThreadPoolExecutor

    from mpirun import run_mpi

    from collectives._kernels import accumulate, merge_add, merge_runs
    from sparcml_apps.datasets import load_svmlight, make_url_like

    with ThreadPoolExecutor(1) as pool:
        ranks = pool.submit(run_mpi, "warm_kernels.py", 2, timeout=600)
        rows = tmp_path_factory.mktemp("warm") / "rows.svm"
        rows.write_text("1 1:0.5 3:1e-3\n-1 2:2.25 4:123456789.123456789\n")
        load_svmlight(rows)
        make_url_like(10, 100, random_state=0, planted="dense")
        for dtype in (np.float32, np.float64):
            for index in (np.uint32, np.uint64):
                i = np.arange(3, dtype=index)
                v = np.ones(3, dtype)
                merge_add(i, v, i, v)
                merge_runs(i, v, np.array([0, 1, 3], np.int64))
                accumulate(i, v, 0, np.zeros(3, dtype))
        ranks.result()


@pytest.fixture
def no_pools():
    """No ``n_jobs`` pool runs when the test begins, and none is left when it ends."""
    from sparcml_apps import jobs

    jobs.close()
    yield
    jobs.close()
