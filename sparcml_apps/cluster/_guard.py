"""Who may reach a cluster of this job: where it listens, TLS credentials made for the run,
and the HTTP servers (dashboard) off unless asked for."""

import socket

LOOPBACK = "127.0.0.1"


def same_host(comm):
    """Whether every rank of ``comm`` runs on this host (one collective call)."""
    from mpi4py import MPI

    return len(set(comm.allgather(MPI.Get_processor_name()))) == 1


def loopback_interface():
    """The name of the network interface that holds 127.0.0.1 (``lo`` on Linux)."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == LOOPBACK for a in addresses):
            return name
    raise OSError(f"no network interface holds {LOOPBACK}; name one with interface=")


def interface_address(interface):
    """The IPv4 address of the network interface ``interface``."""
    import psutil

    addresses = psutil.net_if_addrs().get(interface)
    if addresses is None:
        known = ", ".join(sorted(psutil.net_if_addrs()))
        raise ValueError(
            f"interface must name a network interface of this host ({known}); got {interface!r}"
        )
    for address in addresses:
        if address.family == socket.AF_INET:
            return address.address
    raise ValueError(f"interface {interface!r} has no IPv4 address")


def credentials():
    """``(certificate, key)``: a self-signed certificate and its private key, PEM text,
    made now; every member of the cluster (scheduler, workers, clients) holds the pair,
    and connections that do not present it are refused."""
    from distributed.security import Security

    try:
        made = Security.temporary()
    except ImportError as exc:  # pragma: no cover - cryptography is a dependency
        raise ImportError(f"{exc}; or pass insecure=True to run without TLS") from None
    return made.tls_scheduler_cert, made.tls_scheduler_key


def require_tls(certificate, key):
    """Make this process's Dask components speak TLS only, with ``certificate`` (the
    authority too) and ``key``, for every role."""
    import dask

    settings = {
        "distributed.comm.require-encryption": True,
        "distributed.comm.tls.ca-file": certificate,
    }
    for role in ("client", "scheduler", "worker"):
        settings[f"distributed.comm.tls.{role}.cert"] = certificate
        settings[f"distributed.comm.tls.{role}.key"] = key
    dask.config.set(settings)


def serve_no_http():
    """The scheduler's and the workers' HTTP servers serve nothing (no dashboard, no JSON
    of the cluster's state, no proxy to the workers)."""
    import dask

    dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []})


def protection(comm, *, interface, insecure, dashboard, dashboard_address, options):
    """The ``dask_mpi.initialize`` options that keep others out (see ``initialize``), with
    this process's dask config set to match; collective over ``comm``: an error on one
    rank is raised on every rank."""
    import collectives

    local = same_host(comm)
    protocol = options.pop("protocol", None if insecure else "tls")
    error, pair = None, None
    try:
        if not insecure and protocol != "tls":
            raise ValueError(f"protocol must be 'tls' unless insecure=True; got {protocol!r}")
        if interface is None and local:
            interface = loopback_interface()
        host = interface_address(interface) if interface is not None else None
        if not insecure and comm.Get_rank() == 0:
            pair = credentials()
    except (ImportError, OSError, ValueError) as exc:
        error = exc
    collectives.check(error, comm)
    if not insecure:
        require_tls(*comm.bcast(pair, root=0))
    if dashboard:
        address = dashboard_address or f"{host or ''}:8787"
    else:
        serve_no_http()
        address = f"{host or LOOPBACK}:0"
        workers = options.setdefault("worker_options", {})
        workers.setdefault("dashboard_address", f"{host or LOOPBACK}:0")
    return {
        **options,
        "interface": interface,
        "protocol": protocol,
        "dashboard": dashboard,
        "dashboard_address": address,
    }


def describe(address, insecure):
    """One line for the user: where the scheduler listens and who may connect."""
    if insecure:
        who = "no TLS (insecure): any process that reaches this address can run code in it"
    else:
        who = "TLS; only holders of the credentials made for this run may connect"
    return f"Dask scheduler at {address} ({who})"
