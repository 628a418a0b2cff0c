"""Run Python scripts under the venv's ``mpiexec`` in a subprocess, with a timeout."""

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sparcml_apps import _mpiexec

MPIEXEC = Path(sys.executable).parent / "mpiexec"
SCRIPTS = Path(__file__).parent / "mpi"

# One thread per rank; ranks waiting in MPI yield the core often (2 cores, up to 8 ranks).
MPI_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MPIR_CVAR_POLLS_BEFORE_YIELD": "10",
}


@dataclass
class MPIResult:
    returncode: int
    stdout: list  # per rank
    stderr: list  # per rank
    launcher: str  # what mpiexec itself printed

    def report(self):
        parts = [f"--- mpiexec\n{self.launcher}"]
        for rank, (out, err) in enumerate(zip(self.stdout, self.stderr, strict=True)):
            parts.append(f"--- rank {rank} stdout\n{out}--- rank {rank} stderr\n{err}")
        return "\n".join(parts)


def run_mpi(script, nprocs, *args, timeout=120, env=None, check=True, abort_on_error=True):
    """Run ``script`` (a path, or a file name in tests/mpi) on ``nprocs`` ranks.

    The script runs under ``python -m mpi4py``: an uncaught exception (or a non-zero
    exit) on one rank aborts them all instead of leaving the others waiting; without
    ``abort_on_error`` it runs as plain ``python script``, for scripts that end every
    rank themselves.
    Each rank's stdout and stderr are kept apart. With ``check``, a non-zero exit or a
    timeout fails and shows every rank's output; on timeout every process is killed.
    """
    script = Path(script)
    if not script.is_absolute():
        script = SCRIPTS / script
    with tempfile.TemporaryDirectory(prefix="mpirun-") as tmp:
        command = [
            str(MPIEXEC),
            "-n",
            str(nprocs),
            "-outfile-pattern",
            f"{tmp}/out.%r",
            "-errfile-pattern",
            f"{tmp}/err.%r",
            sys.executable,
            *(["-m", "mpi4py"] if abort_on_error else []),
            str(script),
            *map(str, args),
        ]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **MPI_ENV, **(env or {})},
            start_new_session=True,
        )
        timed_out = False
        try:
            launcher, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _mpiexec.stop(process)
            launcher, _ = process.communicate()
        finally:
            if process.poll() is None:
                _mpiexec.stop(process)

        def read(name, rank):
            path = Path(tmp) / f"{name}.{rank}"
            return path.read_text(errors="replace") if path.exists() else ""

        result = MPIResult(
            process.returncode,
            [read("out", r) for r in range(nprocs)],
            [read("err", r) for r in range(nprocs)],
            launcher,
        )
    if timed_out:
        raise AssertionError(
            f"{script.name} on {nprocs} ranks did not finish in {timeout} s\n{result.report()}"
        )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{script.name} on {nprocs} ranks exited {result.returncode}\n{result.report()}"
        )
    return result
