"""Who gets into the Dask cluster of ``sparcml train --dask``: TLS with credentials made
for the run, the loopback interface on one host, no HTTP served."""

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from mpirun import MPI_ENV, MPIEXEC

SMALL = ["--rows", "3000", "--features", "5000", "--nnz-per-row", "20", "--epochs", "2"]
ADDRESS = re.compile(r"Dask scheduler at (\S+) \(")
pytestmark = pytest.mark.usefixtures("compiled_kernels")


def _client_rank(launcher):
    """The process of rank 1 (the Dask client) of the ``mpiexec`` job ``launcher``."""
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if child.environ().get("PMI_RANK") == "1" and "python" in child.name():
                return child
        except psutil.NoSuchProcess:
            continue
    raise AssertionError("rank 1 of the job not found")


def _attack(address, marker, security=None):
    """Connect to ``address`` and run code in the scheduler; the error met, or None."""
    from distributed import Client

    try:
        with Client(address, security=security, timeout=3) as client:
            client.run_on_scheduler(Path(marker).write_text, "ran in the cluster\n")
            return None, client.scheduler_info(n_workers=-1)
    except (OSError, TimeoutError) as exc:  # refused: no connection could be made
        return exc, None


def _run_and_attack(tmp_path, *flags, attacks):
    """Start ``sparcml train --dask`` on 4 ranks; once its cluster is up, stop the client
    rank (the cluster stays up, training waits) and run ``attacks(address)``; let it go
    on; return what the attacks gave and the job's output."""
    command = [str(MPIEXEC), "-n", "4", sys.executable, "-m", "sparcml_apps.cli.main"]
    command += ["train", "--dask", *SMALL, *flags]
    command += ["--model", str(tmp_path / "model.joblib"), "--metrics", str(tmp_path / "m.json")]
    launcher = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **MPI_ENV}, start_new_session=True, cwd=tmp_path,
    )  # fmt: skip
    lines, deadline = [], time.monotonic() + 120
    try:
        for line in launcher.stdout:
            lines.append(line)
            if found := ADDRESS.search(line):
                break
            assert time.monotonic() < deadline, "".join(lines)
        else:
            raise AssertionError("no scheduler address printed:\n" + "".join(lines))
        client_rank = _client_rank(launcher)
        client_rank.suspend()
        try:
            assert launcher.poll() is None
            attacked = attacks(found[1])
            assert launcher.poll() is None  # the cluster was up all along
        finally:
            client_rank.resume()
        rest, _ = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    output = "".join(lines) + rest
    assert launcher.returncode == 0, output
    return attacked, output


def test_a_client_without_the_credentials_cannot_run_anything(tmp_path):
    from distributed.security import Security

    marker = tmp_path / "intruder-was-here"

    def attacks(address):
        host = address.split("://")[1].rsplit(":", 1)[0]
        plain = _attack(address.replace("tls://", "tcp://"), marker)
        own = _attack(address, marker, Security.temporary())  # TLS, other credentials
        return address, host, plain, own

    (address, host, plain, own), output = _run_and_attack(tmp_path, attacks=attacks)
    assert address.startswith("tls://") and host == "127.0.0.1", output
    for error, info in (plain, own):
        assert error is not None and info is None, (error, info)
    assert not marker.exists()
    assert "test accuracy" in output  # and the run went on as it should


def test_insecure_lets_any_client_in_on_loopback_and_serves_no_http(tmp_path):
    # the same attack succeeds without TLS: the test above sees a real refusal
    marker = tmp_path / "intruder-was-here"

    def attacks(address):
        error, info = _attack(address, marker)
        assert error is None, error
        http = info["services"]["dashboard"]
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/json/identity.json", timeout=5)
            served = "the JSON of the cluster"
        except urllib.error.HTTPError as exc:
            served = exc.code
        return address, info, served

    (address, info, served), output = _run_and_attack(tmp_path, "--insecure", attacks=attacks)
    assert marker.read_text() == "ran in the cluster\n"
    assert address.startswith("tcp://127.0.0.1:"), output
    assert sorted(w.split("://")[1].rsplit(":", 1)[0] for w in info["workers"]) == ["127.0.0.1"] * 2
    assert served == 404  # the scheduler's HTTP server, on loopback, serves nothing
    assert "no TLS (insecure)" in output
