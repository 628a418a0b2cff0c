"""An alpha-beta cost model of the allreduce algorithms, used by ``algorithm="auto"``.

A rank's time is ``alpha * messages + beta * bytes_sent + gamma * merged entries + dense_gamma
* dense elements touched``. Supports are taken as uniformly random: the union of ``m``
vectors of ``k`` nonzeros out of ``n`` holds ``n (1 - (1 - k/n)**m)`` entries, an upper bound
for the skewed supports of real gradients. The constants are module attributes; assign
measured ones (or pass them) to fit a machine.

:func:`collectives.calibrate` measures the constants on a communicator and
:func:`store` keeps them in a JSON file (:func:`calibration_path`), one record per number
of ranks; the collectives of a communicator of P ranks then use the record for P that
its rank 0 finds there (:func:`stored`), and the module attributes where there is none.
"""

import functools
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from . import thresholds

ALPHA = 5e-6
"""Seconds per message (latency)."""
BETA = 8e-10
"""Seconds per byte sent (inverse bandwidth; 8e-10 is 10 Gbit/s)."""
GAMMA = 4e-9
"""Seconds per entry of a merge-add of sorted index lists."""
DENSE_GAMMA = 5e-10
"""Seconds per element of dense work (zero fill, elementwise sum)."""

ALGORITHMS = ("ssar_recursive_double", "ssar_split_allgather", "dsar_split_allgather", "dense")
"""The allreduce algorithms by name (``collectives.ALGORITHMS``): those the model
predicts, and ``allreduce`` accepts besides ``"auto"``."""
_HEADER_BYTES = 80  # the agreement check every call makes first
NAMES = ("alpha", "beta", "gamma", "dense_gamma")
CALIBRATION_ENV = "SPARCML_CALIBRATION"


@dataclass(frozen=True)
class Prediction:
    """What the model expects one rank (the busiest) to spend on one call."""

    seconds: float
    bytes_sent: float
    messages: int


def expected_union(size, nnz, count):
    """Expected nonzeros of the sum of ``count`` random vectors of ``nnz`` of ``size``."""
    if size == 0:
        return 0.0
    return size * (1.0 - (1.0 - min(nnz, size) / size) ** count)


def _ceil_log2(n):
    return (n - 1).bit_length()


def predict(
    algorithm,
    nprocs,
    size,
    nnz,
    *,
    value_itemsize=4,
    index_itemsize=4,
    alpha=None,
    beta=None,
    gamma=None,
    dense_gamma=None,
    union=None,
):
    """Predict one rank's cost of ``allreduce`` where every rank holds ``nnz`` nonzeros.

    ``union(count)``: the nonzeros of the sum of ``count`` ranks' vectors (default: of
    uniformly random supports, :func:`expected_union`)."""
    if union is None:

        def union(count):
            return expected_union(size, nnz, count)

    alpha = ALPHA if alpha is None else alpha
    beta = BETA if beta is None else beta
    gamma = GAMMA if gamma is None else gamma
    dense_gamma = DENSE_GAMMA if dense_gamma is None else dense_gamma
    entry = value_itemsize + index_itemsize
    logp = _ceil_log2(nprocs)
    sent = 2.0 * (nprocs - 1) * _HEADER_BYTES / nprocs
    messages = 2 * logp
    merged = 0.0
    touched = 0.0
    if algorithm == "ssar_recursive_double":
        main = 1 << (nprocs.bit_length() - 1)
        rounds = main.bit_length() - 1
        held = [union((2**i) * nprocs / main) for i in range(rounds)]
        sent += entry * sum(held)
        merged += 2 * sum(held)
        # every round's arrays are new (the message received, the merged sum): fresh pages
        touched += 3 * sum(held) * entry / value_itemsize
        messages += 2 * rounds
        if main != nprocs:  # the folded ranks: one more exchange in and one out
            sent += entry * union(nprocs)
            merged += 2 * nnz
            messages += 2
    elif algorithm in ("ssar_split_allgather", "dsar_split_allgather"):
        length = size / nprocs
        share = union(nprocs) / nprocs
        piece = entry * share
        # an owner receives about nnz entries for its range: summed in a dense block
        # (zeroed, added into, scanned) past ACCUMULATE_FRACTION, else merged pairwise
        if nnz > thresholds.ACCUMULATE_FRACTION * length:
            touched += 3 * length
            merged += nnz
        else:
            merged += nnz * max(logp, 1)
        merged += nprocs * share  # the reduced ranges gathered into one result
        if algorithm == "dsar_split_allgather":
            if share > thresholds.delta(length, value_itemsize, index_itemsize):
                piece = value_itemsize * length
                touched += size
        sent += (nprocs - 1) * (entry * nnz / nprocs + 8 + 16 + piece)
        messages += 6 * (nprocs - 1)
    elif algorithm == "dense":
        sent += 2.0 * (nprocs - 1) * size * value_itemsize / nprocs
        touched += size
        messages += 2 * logp
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    if nprocs == 1:
        sent, messages = 0.0, 0
    seconds = alpha * messages + beta * sent + gamma * merged + dense_gamma * touched
    return Prediction(seconds, sent, messages)


def choose(nprocs, size, nnz, *, value_itemsize=4, index_itemsize=4, **constants):
    """The algorithm the model predicts fastest."""
    costs = {
        name: predict(
            name,
            nprocs,
            size,
            nnz,
            value_itemsize=value_itemsize,
            index_itemsize=index_itemsize,
            **constants,
        ).seconds
        for name in ALGORITHMS
    }
    return min(ALGORITHMS, key=costs.__getitem__)


def choose_quickly(nprocs, size, nnz, value_itemsize=4, index_itemsize=4, calibrated=None):
    """:func:`choose` with the ``calibrated`` constants (a tuple in the order of
    :data:`NAMES`, None or NaN for the module's), for ``nnz`` rounded up to the next of 16
    steps per doubling; remembered, as collectives call it every time."""
    rounded = 0 if nnz == 0 else _round_up(nnz)
    defaults = (ALPHA, BETA, GAMMA, DENSE_GAMMA)
    calibrated = calibrated or (None,) * len(NAMES)
    constants = tuple(
        default if value is None or value != value else value
        for value, default in zip(calibrated, defaults, strict=True)
    )
    constants = (*constants, thresholds.DELTA_SCALE)
    return _remembered(nprocs, size, rounded, value_itemsize, index_itemsize, constants)


def _round_up(n):
    top = n.bit_length() - 1
    if top < 4:
        return n
    step = 1 << (top - 4)
    return -(-n // step) * step


@functools.lru_cache(maxsize=4096)
def _remembered(nprocs, size, nnz, value_itemsize, index_itemsize, constants):
    alpha, beta, gamma, dense_gamma, _ = constants
    return choose(
        nprocs,
        size,
        nnz,
        value_itemsize=value_itemsize,
        index_itemsize=index_itemsize,
        alpha=alpha,
        beta=beta,
        gamma=gamma,
        dense_gamma=dense_gamma,
    )


def calibration_path():
    """The calibration file: ``$SPARCML_CALIBRATION``, else ``sparcml/calibration.json``
    under ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""
    if os.environ.get(CALIBRATION_ENV):
        return Path(os.environ[CALIBRATION_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "sparcml" / "calibration.json"


def _records(path):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"calibration file {path} is not readable JSON: {exc}") from exc


def stored(nprocs, path=None):
    """The constants stored for ``nprocs`` ranks (a dict keyed by :data:`NAMES`), or None."""
    record = _records(path or calibration_path()).get(str(nprocs))
    if record is None:
        return None
    constants = {name: record.get(name) for name in NAMES}
    for name, value in constants.items():
        if value is not None and not (isinstance(value, int | float) and value >= 0):
            raise ValueError(
                f"calibration file {path or calibration_path()}: {name} for {nprocs} ranks "
                f"must be a non-negative number or null, got {value!r}"
            )
    return constants


def store(constants, nprocs, path=None):
    """Keep ``constants`` (a dict keyed by :data:`NAMES`) as the record for ``nprocs`` ranks;
    the file written whole, atomically. Returns its path."""
    path = Path(path or calibration_path())
    records = _records(path)
    records[str(nprocs)] = {
        **{name: constants.get(name) for name in NAMES},
        "host": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(records, indent=1) + "\n")
    part.replace(path)
    return path
