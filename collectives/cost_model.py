"""An alpha-beta cost model of the allreduce algorithms, used by ``algorithm="auto"``.

A rank's time is ``alpha * messages + beta * bytes_sent + gamma * merged entries + dense_gamma
* dense elements touched + BITMAP_SECONDS * entries sent as bitmaps`` (the last from
:mod:`collectives.thresholds`). Supports are taken as uniformly random: the union of ``m``
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
"""The constants' names: the keys of a calibration, in this order."""
CALIBRATION_ENV = "SPARCML_CALIBRATION"
"""The environment variable that names the calibration file (:func:`calibration_path`)."""


@dataclass(frozen=True)
class Prediction:
    """What the model expects one rank (the busiest) to spend on one call.

    Returned by :func:`predict`.

    Parameters
    ----------
    seconds : float
        The time of the call.
    bytes_sent : float
        The bytes the rank sends (an expectation: not always whole).
    messages : int
        The messages the rank sends.

    Examples
    --------
    >>> from collectives.cost_model import predict
    >>> p = predict("dense", 4, 2**20, 0)
    >>> p.messages, p.bytes_sent  # 2 (P - 1) / P of 4 MiB, and the 80-byte header's share
    (8, 6291576.0)
    """

    seconds: float
    bytes_sent: float
    messages: int


def expected_union(size, nnz, count):
    """Expected nonzeros of the sum of ``count`` random vectors of ``nnz`` of ``size``.

    Each vector's support drawn uniformly at random: ``size (1 - (1 - nnz/size)**count)``,
    an upper bound for the overlapping supports of real gradients.

    Parameters
    ----------
    size : int
        The length of the vectors.
    nnz : int
        The nonzeros of each vector (taken as ``size`` where larger).
    count : int or float
        The number of vectors summed.

    Returns
    -------
    float
        The expected nonzeros of the sum, 0.0 where ``size`` is 0.

    Examples
    --------
    >>> from collectives.cost_model import expected_union
    >>> f"{expected_union(100, 10, 2):.2f}"  # 100 (1 - 0.9**2)
    '19.00'
    >>> expected_union(10, 20, 3)
    10.0
    """
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

    The busiest rank's ``alpha * messages + beta * bytes_sent + gamma * merged entries +
    dense_gamma * dense elements touched + thresholds.BITMAP_SECONDS * entries sent as
    bitmaps``, for the messages, bytes and work of the algorithm and of the agreement check
    that every call makes first. Where the algorithm takes a path by a threshold, the model
    takes it by the same one (:mod:`collectives.thresholds`), and it sends an index list as
    a bitmap where :func:`thresholds.sends_bitmap` says so.

    Parameters
    ----------
    algorithm : str
        A name of :data:`ALGORITHMS`.
    nprocs : int
        The number of ranks, P (at least 1).
    size : int
        The length of the vectors.
    nnz : int
        The nonzeros of each rank's vector.
    value_itemsize : int, default 4
        The bytes of a value: 4 for float32, 8 for float64.
    index_itemsize : int, default 4
        The bytes of an index: 4 for ``uint32`` (size below ``2**32``), 8 for ``uint64``.
    alpha, beta, gamma, dense_gamma : float, optional
        The constants; None (the default) takes the module's :data:`ALPHA`, :data:`BETA`,
        :data:`GAMMA` and :data:`DENSE_GAMMA`.
    union : callable, optional
        ``union(count)``: the nonzeros of the sum of ``count`` ranks' vectors (``count``
        may be fractional). Default: of uniformly random supports, :func:`expected_union`.

    Returns
    -------
    Prediction
        The seconds, bytes sent and messages of the busiest rank; on one rank no bytes
        and no messages.

    Raises
    ------
    ValueError
        If ``algorithm`` is not a name of :data:`ALGORITHMS`.

    See Also
    --------
    choose : The algorithm predicted fastest.

    Examples
    --------
    >>> from collectives.cost_model import ALGORITHMS, predict
    >>> constants = dict(alpha=5e-6, beta=8e-10, gamma=4e-9, dense_gamma=5e-10)
    >>> for name in ALGORITHMS:  # 8 ranks, 2**20 entries, 100 nonzeros each
    ...     p = predict(name, 8, 2**20, 100, **constants)
    ...     print(f"{name:22} {p.seconds:.2e} s {p.bytes_sent:9.0f} B {p.messages:3d} messages")
    ssar_recursive_double  7.23e-05 s      5739 B  12 messages
    ssar_split_allgather   2.50e-04 s      6606 B  48 messages
    dsar_split_allgather   2.50e-04 s      6606 B  48 messages
    dense                  6.46e-03 s   7340172 B  12 messages
    """
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
    coded = 0.0  # entries written as a bitmap and read back

    def block(n, length):
        """The bytes of a block of ``n`` entries of a range of ``length``, and its entries
        coded as a bitmap."""
        if thresholds.sends_bitmap(n, length, index_itemsize, beta):
            words = thresholds.bitmap_words(length, index_itemsize)
            return value_itemsize * n + index_itemsize * words, n
        return entry * n, 0.0

    if algorithm == "ssar_recursive_double":
        main = 1 << (nprocs.bit_length() - 1)
        rounds = main.bit_length() - 1
        held = [union((2**i) * nprocs / main) for i in range(rounds)]
        for n in held:
            nbytes, ncoded = block(n, size)
            sent += nbytes
            coded += ncoded
        merged += 2 * sum(held)
        # every round's arrays are new (the message received, the merged sum): fresh pages
        touched += 3 * sum(held) * entry / value_itemsize
        messages += 2 * rounds
        if main != nprocs:  # the folded ranks: one more exchange in and one out
            nbytes, ncoded = block(union(nprocs), size)
            sent += nbytes
            coded += ncoded
            merged += 2 * nnz
            messages += 2
    elif algorithm in ("ssar_split_allgather", "dsar_split_allgather"):
        length = size / nprocs
        share = union(nprocs) / nprocs
        slice_bytes, slice_coded = block(nnz / nprocs, length)
        piece, piece_coded = block(share, length)
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
                piece, piece_coded = value_itemsize * length, 0.0
                touched += size
        sent += (nprocs - 1) * (slice_bytes + 8 + 16 + piece)
        coded += (nprocs - 1) * (slice_coded + piece_coded)
        messages += 6 * (nprocs - 1)
    elif algorithm == "dense":
        sent += 2.0 * (nprocs - 1) * size * value_itemsize / nprocs
        touched += size
        messages += 2 * logp
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    if nprocs == 1:
        sent, messages, coded = 0.0, 0, 0.0
    seconds = alpha * messages + beta * sent + gamma * merged + dense_gamma * touched
    seconds += thresholds.BITMAP_SECONDS * coded
    return Prediction(seconds, sent, messages)


def choose(nprocs, size, nnz, *, value_itemsize=4, index_itemsize=4, **constants):
    """The algorithm the model predicts fastest.

    Parameters
    ----------
    nprocs : int
        The number of ranks, P.
    size : int
        The length of the vectors.
    nnz : int
        The nonzeros of each rank's vector (``allreduce`` passes the largest of any rank).
    value_itemsize : int, default 4
        The bytes of a value: 4 for float32, 8 for float64.
    index_itemsize : int, default 4
        The bytes of an index: 4 for ``uint32``, 8 for ``uint64``.
    **constants : float or callable
        ``alpha``, ``beta``, ``gamma``, ``dense_gamma`` (or ``union``), passed to
        :func:`predict`; the module's constants for those not given.

    Returns
    -------
    str
        The name of :data:`ALGORITHMS` of the least predicted seconds (the first of them
        on a tie).

    See Also
    --------
    predict : The cost of each algorithm.

    Examples
    --------
    >>> from collectives.cost_model import choose
    >>> constants = dict(alpha=5e-6, beta=8e-10, gamma=4e-9, dense_gamma=5e-10)
    >>> for nnz in (100, 30_000, 2**18):  # of 2**20 entries, on 8 ranks
    ...     print(nnz, choose(8, 2**20, nnz, **constants))
    100 ssar_recursive_double
    30000 ssar_split_allgather
    262144 dense
    """
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
    """:func:`choose` with the ``calibrated`` constants, remembered.

    For ``nnz`` rounded up to the next of 16 steps per doubling, and remembered (with the
    constants, :data:`thresholds.DELTA_SCALE` and :data:`thresholds.BITMAP` in the key),
    as the collectives call it on every ``algorithm="auto"`` call.

    Parameters
    ----------
    nprocs : int
        The number of ranks, P.
    size : int
        The length of the vectors.
    nnz : int
        The largest nonzero count of any rank's vector.
    value_itemsize : int, default 4
        The bytes of a value: 4 for float32, 8 for float64.
    index_itemsize : int, default 4
        The bytes of an index: 4 for ``uint32``, 8 for ``uint64``.
    calibrated : tuple of float, optional
        The constants in the order of :data:`NAMES`, None or NaN for the module's; None
        (the default) for the module's all.

    Returns
    -------
    str
        The name of :data:`ALGORITHMS` predicted fastest.

    Examples
    --------
    >>> from collectives.cost_model import choose_quickly
    >>> choose_quickly(8, 2**20, 100, calibrated=(5e-6, 8e-10, 4e-9, 5e-10))
    'ssar_recursive_double'
    """
    rounded = 0 if nnz == 0 else _round_up(nnz)
    defaults = (ALPHA, BETA, GAMMA, DENSE_GAMMA)
    calibrated = calibrated or (None,) * len(NAMES)
    constants = tuple(
        default if value is None or value != value else value
        for value, default in zip(calibrated, defaults, strict=True)
    )
    constants = (*constants, thresholds.DELTA_SCALE, thresholds.BITMAP)
    return _remembered(nprocs, size, rounded, value_itemsize, index_itemsize, constants)


def _round_up(n):
    top = n.bit_length() - 1
    if top < 4:
        return n
    step = 1 << (top - 4)
    return -(-n // step) * step


@functools.lru_cache(maxsize=4096)
def _remembered(nprocs, size, nnz, value_itemsize, index_itemsize, constants):
    alpha, beta, gamma, dense_gamma, *_ = constants
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
    """The path of the calibration file.

    ``$SPARCML_CALIBRATION`` (:data:`CALIBRATION_ENV`), else ``sparcml/calibration.json``
    under ``$XDG_CACHE_HOME`` (default ``~/.cache``).

    Returns
    -------
    pathlib.Path
        The path, whether or not the file exists.

    Examples
    --------
    >>> from unittest import mock
    >>> from collectives.cost_model import calibration_path
    >>> with mock.patch.dict("os.environ", {"SPARCML_CALIBRATION": "/data/constants.json"}):
    ...     print(calibration_path())
    /data/constants.json
    >>> with mock.patch.dict("os.environ", {"SPARCML_CALIBRATION": "", "XDG_CACHE_HOME": "/c"}):
    ...     print(calibration_path())
    /c/sparcml/calibration.json
    """
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
    """The constants stored for ``nprocs`` ranks (a dict keyed by :data:`NAMES`), or None.

    Parameters
    ----------
    nprocs : int
        The number of ranks of the record.
    path : str or os.PathLike, optional
        The calibration file; None (the default) means :func:`calibration_path`.

    Returns
    -------
    dict or None
        ``{"alpha": ..., "beta": ..., "gamma": ..., "dense_gamma": ...}``, None for a
        constant the record does not hold; None where the file or the record is missing.

    Raises
    ------
    ValueError
        If the file is not readable JSON, not an object of records, or the record not an
        object whose constants are non-negative numbers or null.

    See Also
    --------
    store : Write a record.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from collectives.cost_model import store, stored
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "calibration.json"
    >>> stored(4, path) is None  # no file yet
    True
    >>> _ = store({"alpha": 2e-6, "beta": 1e-9, "gamma": 3e-9}, 4, path)
    >>> stored(4, path)
    {'alpha': 2e-06, 'beta': 1e-09, 'gamma': 3e-09, 'dense_gamma': None}
    >>> stored(8, path) is None
    True
    >>> folder.cleanup()
    """
    where = path or calibration_path()
    records = _records(where)
    if not isinstance(records, dict):
        raise ValueError(
            f"calibration file {where}: expected a JSON object of records by number of "
            f"ranks, got {type(records).__name__}"
        )
    record = records.get(str(nprocs))
    if record is None:
        return None
    if not isinstance(record, dict):
        raise ValueError(
            f"calibration file {where}: the record for {nprocs} ranks must be a JSON "
            f"object of constants, got {type(record).__name__}"
        )
    constants = {name: record.get(name) for name in NAMES}
    for name, value in constants.items():
        if value is not None and not (isinstance(value, int | float) and value >= 0):
            raise ValueError(
                f"calibration file {where}: {name} for {nprocs} ranks "
                f"must be a non-negative number or null, got {value!r}"
            )
    return constants


def store(constants, nprocs, path=None):
    """Keep ``constants`` as the record for ``nprocs`` ranks in the calibration file.

    The record replaces any earlier one for ``nprocs``, with the host name and the time;
    the others are kept. The file is written whole, atomically (to ``<name>.part``, then
    renamed), its folder made where missing.

    Parameters
    ----------
    constants : dict
        Keyed by :data:`NAMES`, as :func:`collectives.calibrate` returns them; a name
        missing is stored as null.
    nprocs : int
        The number of ranks the constants were measured on.
    path : str or os.PathLike, optional
        The calibration file; None (the default) means :func:`calibration_path`.

    Returns
    -------
    pathlib.Path
        The path of the file written.

    Raises
    ------
    ValueError
        If the file exists and is not readable JSON.
    OSError
        If the file cannot be written.

    See Also
    --------
    stored : Read a record back.
    collectives.cost_constants : The constants the collectives of a communicator use.

    Examples
    --------
    >>> import json
    >>> import tempfile
    >>> from pathlib import Path
    >>> from collectives.cost_model import store
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = store({"gamma": 3e-9}, 1, Path(folder.name) / "sparcml" / "calibration.json")
    >>> record = json.loads(path.read_text())["1"]
    >>> record["gamma"], record["alpha"], sorted(record)
    (3e-09, None, ['alpha', 'beta', 'dense_gamma', 'gamma', 'host', 'time'])
    >>> folder.cleanup()
    """
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
