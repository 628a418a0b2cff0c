"""Measure the cost model's constants on P ranks and store them for ``algorithm="auto"``.

For every P: latency (alpha, seconds per message) and inverse bandwidth (beta, seconds per
byte) from every rank sending to every other at once, and the compute constants (gamma per
merged entry, dense_gamma per dense element), stored as the record for P in the calibration
file (``collectives.cost_model.calibration_path()``), which the collectives of every later
communicator of P ranks read. With ``--rate``, measured over emulated links (root only).
"""

import json

from collectives import cost_model

from .._paths import option, writable_file
from . import netem

MODULE = "sparcml_apps.bench._calibrate_ranks"


def add_arguments(parser):
    parser.add_argument(
        "--nprocs", type=int, nargs="+", default=[2, 4], help="numbers of ranks (default: 2 4)"
    )
    parser.add_argument(
        "--path",
        type=option(writable_file),
        default=None,
        help="the calibration file (default: $SPARCML_CALIBRATION, else "
        "~/.cache/sparcml/calibration.json)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed runs a point (default: 5)")
    parser.add_argument(
        "--rate",
        help="measure ranks in network namespaces over links of this tc rate, e.g. 1gbit "
        "(root only; default: the local node)",
    )
    parser.add_argument("--quick", action="store_true", help="P = 2, two timed runs a point")


def _measure(nprocs, args, path):
    options = ["--path", path, "--repeat", args.repeat]
    done = netem.run_module(nprocs, MODULE, options, rate=args.rate)
    if done.returncode != 0:
        raise RuntimeError(
            f"calibration on {nprocs} ranks failed (exit {done.returncode}):\n{done.stderr}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _format(value, unit, scale):
    return "-" if value is None else f"{value * scale:.3g} {unit}"


def run(args):
    if args.quick:
        args.nprocs, args.repeat = [2], 2
    path = args.path or cost_model.calibration_path()
    reason = netem.skip_reason(args.rate)
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    print("| P | alpha | beta (bandwidth) | gamma | dense_gamma |")
    print("|---|---|---|---|---|")
    for nprocs in args.nprocs:
        r = _measure(nprocs, args, path)
        bandwidth = "" if r["beta"] is None else f" ({8e-9 / r['beta']:.2f} Gbit/s)"
        print(
            f"| {nprocs} | {_format(r['alpha'], 'us', 1e6)} "
            f"| {_format(r['beta'], 'ns/B', 1e9)}{bandwidth} "
            f"| {_format(r['gamma'], 'ns', 1e9)} | {_format(r['dense_gamma'], 'ns', 1e9)} |"
        )
    print(f"\nstored in {path}")
    return 0
