"""Emulated network links: MPI ranks in network namespaces joined by shaped veth links.

``EmulatedNetwork(nprocs, "1gbit")`` makes one network namespace per rank, each with an
``eth0`` at ``10.213.0.(rank + 1)/24``, and a hub namespace whose bridge joins them. Both
directions of every link go through a token bucket (``tc tbf``) at the given rate, like a
switch port. ``run_module`` starts a Python module on the ranks with ``mpiexec``: MPICH
crosses namespaces only over its TCP path (``MPIR_CVAR_NOLOCAL=1``, the ``ofi`` netmod,
libfabric's ``tcp`` provider), and its launcher, hydra, starts the proxy of each host
through a small script that enters that host's namespace (``-launcher ssh -launcher-exec``).
Leaving the ``with`` block deletes every namespace, and so every link; so do a failed
setup and SIGTERM; namespaces that a run killed outright left behind are deleted by the
next one. Needs root, ``ip`` and ``tc``: :func:`unavailable` says what is missing.

Only bandwidth is emulated: veth links add no latency of their own.
"""

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import _mpiexec

SUBNET = "10.213.0"
MPI_OVER_TCP = {
    "MPIR_CVAR_NOLOCAL": "1",
    "MPIR_CVAR_CH4_NETMOD": "ofi",
    "FI_PROVIDER": "tcp",
    "FI_TCP_IFACE": "eth0",
}
_RATE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)bit$")
_UNIT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}
_BURST_SECONDS = 0.002  # a token bucket holds this long a send at full rate
_LAUNCHER = """#!/bin/sh
# hydra runs: this [-x] HOST COMMAND; HOST 10.213.0.N is the namespace of rank N - 1
[ "$1" = "-x" ] && shift
host=$1
shift
exec ip netns exec "{prefix}$(( ${{host##*.}} - 1 ))" sh -c "$*"
"""


def unavailable():
    """Why emulated links cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "emulated links need root (network namespaces, veth links, tc)"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"emulated links need {' and '.join(missing)} (iproute2)"
    return None


def rate_bits(rate):
    """Bits per second of a ``tc`` rate such as ``"1gbit"`` or ``"500mbit"``."""
    match = _RATE.match(rate) if isinstance(rate, str) else None
    if match is None:
        raise ValueError(f"rate must be a tc rate such as '1gbit' or '500mbit', got {rate!r}")
    return float(match.group(1)) * _UNIT[match.group(2)]


def run_module(nprocs, module, args=(), *, rate=None, env=None, timeout=None):
    """Run ``python -m module args`` on ``nprocs`` ranks: on this node, or with ``rate``
    over emulated links of that rate, made for the run; the completed process."""
    if rate is None:
        return _mpiexec.run_module(nprocs, module, args, env=env, timeout=timeout)
    with EmulatedNetwork(nprocs, rate) as network:
        return network.run_module(module, args, env=env, timeout=timeout)


def skip_reason(rate):
    """None when ``rate`` is None or links can be made here; else why not. A bad rate
    raises ``ValueError``."""
    if rate is None:
        return None
    rate_bits(rate)
    return unavailable()


_LABEL = re.compile(r"^sparcml(\d+)-[0-9a-f]+-")
"""The start of the names a run gives its namespaces and its launcher folder (the
:attr:`EmulatedNetwork.label`), with the pid of the process that made them."""


def _stale(name):
    """Whether ``name`` is one of a run's names, and its process is no longer alive."""
    match = _LABEL.match(name)
    return match is not None and not Path(f"/proc/{match.group(1)}").exists()


def remove_stale():
    """Delete the namespaces and launcher folders that runs of processes no longer alive
    left behind (a run killed outright cannot clean up after itself)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in (line.split()[0] for line in listed.splitlines() if line.strip()):
        if _stale(name):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    for folder in Path(tempfile.gettempdir()).glob("sparcml*-launch-*"):
        if _stale(folder.name):
            shutil.rmtree(folder, ignore_errors=True)


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class EmulatedNetwork:
    """``nprocs`` namespaces joined through a bridge by links of ``rate`` each way."""

    def __init__(self, nprocs, rate="1gbit"):
        if nprocs < 1 or nprocs > 250:
            raise ValueError(f"nprocs must be in [1, 250], got {nprocs}")
        self.nprocs, self.rate = nprocs, rate
        self.burst = max(64 * 1024, int(rate_bits(rate) / 8 * _BURST_SECONDS))
        # the pid finds stale namespaces; the token keeps apart runs of one process, and of
        # processes of one pid in other pid namespaces
        self.label = f"sparcml{os.getpid()}-{secrets.token_hex(3)}"
        self.prefix, self.hub = f"{self.label}-r", f"{self.label}-hub"
        self.hosts = [f"{SUBNET}.{rank + 1}" for rank in range(nprocs)]
        self._made = []
        self._folder = None
        self._signals = contextlib.ExitStack()

    def __enter__(self):
        reason = unavailable()
        if reason is not None:
            raise PermissionError(reason)
        remove_stale()
        self._signals.enter_context(_mpiexec.unwinding())
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _namespace(self, name):
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _shape(self, namespace, device):
        _ip("-n", namespace, "link", "set", device, "up")
        _ip("netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "root",
            "tbf", "rate", self.rate, "burst", str(self.burst), "latency", "100ms")  # fmt: skip

    def _build(self):
        self._namespace(self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        for rank, host in enumerate(self.hosts):
            namespace = f"{self.prefix}{rank}"
            self._namespace(namespace)
            port = f"port{rank}"
            _ip("-n", self.hub, "link", "add", port, "type", "veth",
                "peer", "name", "eth0", "netns", namespace)  # fmt: skip
            _ip("-n", self.hub, "link", "set", port, "master", "br0")
            _ip("-n", namespace, "addr", "add", f"{host}/24", "dev", "eth0")
            self._shape(self.hub, port)
            self._shape(namespace, "eth0")
        self._folder = Path(tempfile.mkdtemp(prefix=f"{self.label}-launch-"))
        self.launcher = self._folder / "launch"
        self.launcher.write_text(_LAUNCHER.format(prefix=self.prefix))
        self.launcher.chmod(0o755)

    def close(self):
        """Delete the namespaces (and with them the links) and the launcher script."""
        while self._made:
            subprocess.run(["ip", "netns", "del", self._made.pop()], capture_output=True)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        self._signals.close()

    def command(self, argv):
        """The command that runs ``argv`` on every rank, one rank per namespace."""
        return [
            "ip", "netns", "exec", f"{self.prefix}0", _mpiexec.mpiexec(),
            "-launcher", "ssh", "-launcher-exec", str(self.launcher), "-iface", "eth0",
            "-hosts", ",".join(self.hosts), "-ppn", "1", "-n", str(self.nprocs), *argv,
        ]  # fmt: skip

    def run(self, argv, *, env=None, timeout=None):
        """Run ``argv`` on the ranks; the completed process (output captured). On a timeout
        every process is killed and ``subprocess.TimeoutExpired`` raised."""
        environment = {**MPI_OVER_TCP, **(env or {})}
        return _mpiexec.run(self.command(argv), env=environment, timeout=timeout)

    def run_module(self, module, args=(), *, env=None, timeout=None):
        """Run ``python -m module args`` on the ranks, as :meth:`run`."""
        return self.run([sys.executable, "-m", module, *map(str, args)], env=env, timeout=timeout)
