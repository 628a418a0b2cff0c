"""Emulated links: MPI ranks in network namespaces, at the rate asked for (root only)."""

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sparcml_apps.bench import netem

SCRIPT = Path(__file__).parent / "mpi" / "measure_bandwidth.py"
needs_root = pytest.mark.skipif(netem.unavailable() is not None, reason=str(netem.unavailable()))


def namespaces():
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


@pytest.mark.parametrize(("rate", "bits"), [("1gbit", 1e9), ("500mbit", 5e8), ("64kbit", 64e3)])
def test_rates_read_as_tc_reads_them(rate, bits):
    assert netem.rate_bits(rate) == bits


@pytest.mark.parametrize("rate", ["1 gbit", "fast", "1gbps", 10])
def test_bad_rates(rate):
    with pytest.raises(ValueError, match="rate must be a tc rate such as '1gbit'"):
        netem.rate_bits(rate)


@needs_root
@pytest.mark.parametrize("rate", ["200mbit", "1gbit"])
def test_mpi_between_namespaces_runs_at_the_link_rate(rate):
    before = namespaces()
    with netem.EmulatedNetwork(2, rate) as network:
        made = namespaces() - before
        assert len(made) == 3  # two ranks and the hub
        done = network.run([sys.executable, "-m", "mpi4py", str(SCRIPT), "20"], timeout=120)
    assert done.returncode == 0, done.stderr
    measured = float(done.stdout.split()[-1])
    # the token bucket lets one burst through at once: a little over the rate at most
    assert 0.6 * netem.rate_bits(rate) < measured < 1.15 * netem.rate_bits(rate), measured
    assert not made & namespaces()


@needs_root
def test_namespaces_are_removed_when_the_run_fails():
    before = namespaces()
    with pytest.raises(RuntimeError, match="inside"):
        with netem.EmulatedNetwork(2, "1gbit") as network:
            made = namespaces() - before
            assert {network.hub, f"{network.prefix}0", f"{network.prefix}1"} <= made
            raise RuntimeError("inside")
    assert not made & namespaces()


HOLD = """
import time
from sparcml_apps.bench import netem
with netem.EmulatedNetwork(2, "1gbit"):
    print("ready", flush=True)
    time.sleep(60)
"""


def hold_links():
    """A process that makes links and waits inside the ``with`` block; its namespaces."""
    before = namespaces()
    process = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    return process, namespaces() - before


@needs_root
def test_a_terminated_run_removes_its_namespaces():
    process, made = hold_links()
    assert len(made) == 3 and all(str(process.pid) in name for name in made)
    process.terminate()
    assert process.wait(timeout=30) != 0
    assert not made & namespaces()


@needs_root
def test_namespaces_of_a_killed_run_are_removed_by_the_next():
    process, made = hold_links()
    process.kill()
    process.wait(timeout=30)
    folders = set(Path(tempfile.gettempdir()).glob(f"sparcml{process.pid}-*-launch-*"))
    assert made <= namespaces() and len(folders) == 1  # killed: nothing ran to clean up
    netem.remove_stale()
    assert not made & namespaces()
    assert not [folder for folder in folders if folder.exists()]
