"""The SparCML allreduce algorithms, as generators over a :class:`~collectives._wire.Wire`.

Each returns the sum: a :class:`SparseVector`, or a dense ndarray where it became dense.
"""

import numpy as np
from mpi4py import MPI

from . import thresholds
from ._codec import EXACT
from ._kernels import accumulate, from_bitmap, merge_add, merge_runs, to_bitmap
from ._vector import SparseVector
from ._wire import displacements
from .cost_model import ALGORITHMS

# tag offsets: the two messages of a sparse vector in recursive doubling, and in the two
# phases of split_allgather
_INDICES, _VALUES = 0, 1
_RANGES, _REDUCED = 2, 4


def split_bounds(size, nprocs):
    """The ``nprocs + 1`` boundaries of the index ranges owned by each rank."""
    return np.arange(nprocs + 1, dtype=np.int64) * size // nprocs


def _index_message(wire, indices, lo, hi):
    """The message that carries the sorted ``indices`` of ``[lo, hi)``: the list, or its
    bitmap where :func:`.thresholds.sends_bitmap` says so (which then has fewer items)."""
    if not thresholds.sends_bitmap(indices.size, hi - lo, indices.itemsize, wire.beta):
        return indices
    words = np.empty(thresholds.bitmap_words(hi - lo, indices.itemsize), indices.dtype)
    to_bitmap(indices, lo, words)
    return words


def _is_bitmap(n_items, n_values):
    """Whether an index message of ``n_items`` for ``n_values`` values is a bitmap: a list
    has one item a value, a dense block none, a bitmap fewer than its values."""
    return (n_items != n_values) & (n_items != 0)


def _indices(message, n_values, lo, out=None):
    """The indices an index message carries for ``n_values`` values from ``lo`` (written
    into ``out`` where given): the message itself where it lists them (or is empty: a
    dense block), else its bitmap's."""
    if not _is_bitmap(message.size, n_values):
        if out is None:
            return message
        out[:] = message
        return out
    out = np.empty(n_values, message.dtype) if out is None else out
    from_bitmap(message, lo, out)
    return out


def _start_send(wire, vec, indices, values, dest, codec, key):
    """Start sending a sparse vector as long as ``vec``; the requests and the values as
    the receiver gets them."""
    message = codec.encode(values, key)
    sends = [
        wire.isend(_index_message(wire, indices, 0, vec.size), dest, _INDICES),
        wire.isend(message, dest, _VALUES),
    ]
    return sends, codec.decode(message, values.dtype)


def _send(wire, vec, indices, values, dest, codec, key):
    sends, values = _start_send(wire, vec, indices, values, dest, codec, key)
    yield sends
    return values


def _receive(wire, source, like, codec, sends=()):
    probes = wire.probe(source, _INDICES), wire.probe(source, _VALUES)
    yield probes[0]
    yield probes[1]
    message_dtype = codec.dtype(like.values.dtype)
    indices = np.empty(probes[0].count(like.indices.dtype), like.indices.dtype)
    message = np.empty(probes[1].count(message_dtype), message_dtype)
    yield [
        *sends,
        wire.irecv_probed(probes[0], indices),
        wire.irecv_probed(probes[1], message),
    ]
    values = codec.decode(message, like.values.dtype)
    return _indices(indices, values.size, 0), values


def recursive_double(wire, vec):
    """SSAR_Recursive_double: log2 P rounds of swapping partial sums with ``rank ^ mask``.

    With P not a power of two, the first ``2 * extra`` ranks pair up: even ones hand their
    vector to the next odd one before the rounds and get the sum back after them, exact
    (the other ranks hold it unrounded).
    """
    nprocs, rank = wire.size, wire.rank
    indices, values = vec.indices, vec.values
    main = 1 << (nprocs.bit_length() - 1)
    extra = nprocs - main
    folded = rank < 2 * extra
    if folded and rank % 2 == 0:
        yield from _send(wire, vec, indices, values, rank + 1, wire.codec, (0, rank))
        indices, values = yield from _receive(wire, rank + 1, vec, EXACT)
        return SparseVector(indices, values, vec.size, check=False)
    if folded:
        got = yield from _receive(wire, rank - 1, vec, wire.codec)
        indices, values = merge_add(*got, indices, values)
    vrank = rank // 2 if folded else rank - extra
    mask = 1
    while mask < main:
        vpartner = vrank ^ mask
        partner = 2 * vpartner + 1 if vpartner < extra else vpartner + extra
        # the ranks vrank // mask * mask ... + mask - 1 hold this same partial sum
        key = (mask, vrank // mask)
        sends, values = _start_send(wire, vec, indices, values, partner, wire.codec, key)
        got = yield from _receive(wire, partner, vec, wire.codec, sends)
        indices, values = merge_add(indices, values, *got)
        mask <<= 1
    if folded:
        yield from _send(wire, vec, indices, values, rank - 1, EXACT, ())
    if indices is vec.indices:
        indices, values = indices.copy(), values.copy()
    return SparseVector(indices, values, vec.size, check=False)


def _reduce_range(runs_indices, runs_values, counts, lo, hi, dynamic):
    """Sum the sorted runs received for ``[lo, hi)``: (indices, values) or a dense block."""
    length = hi - lo
    total = runs_indices.size
    value_size = runs_values.itemsize
    limit = thresholds.delta(length, value_size, runs_indices.itemsize) if dynamic else np.inf
    if total > thresholds.ACCUMULATE_FRACTION * length:
        block = np.zeros(length, runs_values.dtype)
        accumulate(runs_indices, runs_values, lo, block)
        nonzero = np.flatnonzero(block)
        if nonzero.size > limit:
            return None, block
        return (nonzero + lo).astype(runs_indices.dtype), block[nonzero]
    offsets = np.append(displacements(counts), total)
    indices, values = merge_runs(runs_indices, runs_values, offsets)
    if indices.size > limit:
        block = np.zeros(length, runs_values.dtype)
        block[indices - lo] = values
        return None, block
    return indices, values


def _swap_with_all(wire, outgoing, ranges, lows, like, tag):
    """Send ``outgoing[p] = (indices, values)``, sorted indices of the index range
    ``ranges[p] = (lo, hi)``, to every other rank ``p`` and receive theirs, whose indices
    start at ``lows[p]``: direct messages, all in flight at once, sizes learnt by probing.

    Returns the blocks of all ranks (this rank's own included, as the others decode it)
    concatenated in rank order, and each block's number of indices and of values.
    """
    nprocs, rank = wire.size, wire.rank
    peers = [(rank + shift) % nprocs for shift in range(1, nprocs)]
    encoded = {}  # a block sent to several ranks is encoded once
    for _, values in outgoing:
        if id(values) not in encoded:
            encoded[id(values)] = wire.codec.encode(values, (tag, rank))
    message_dtype = wire.codec.dtype(like.values.dtype)
    requests = []
    for peer in peers:
        indices, values = outgoing[peer]
        if id(indices) not in encoded:
            encoded[id(indices)] = _index_message(wire, indices, *ranges[peer])
        requests += [
            wire.isend(encoded[id(indices)], peer, tag),
            wire.isend(encoded[id(values)], peer, tag + 1),
        ]
    counts = np.zeros((nprocs, 2), np.int64)
    counts[rank] = outgoing[rank][0].size, encoded[id(outgoing[rank][1])].size
    probes = {}
    for peer in peers:
        probes[peer] = (wire.probe(peer, tag), wire.probe(peer, tag + 1))
        yield probes[peer][0]
        yield probes[peer][1]
        counts[peer] = (
            probes[peer][0].count(like.indices.dtype),
            probes[peer][1].count(message_dtype),
        )
    all_indices = np.empty(int(counts[:, 0].sum()), like.indices.dtype)
    all_values = np.empty(int(counts[:, 1].sum()), message_dtype)
    index_at, value_at = displacements(counts[:, 0]), displacements(counts[:, 1])

    def block(owner):
        return (
            all_indices[index_at[owner] : index_at[owner] + counts[owner, 0]],
            all_values[value_at[owner] : value_at[owner] + counts[owner, 1]],
        )

    for peer in peers:
        indices, values = block(peer)
        requests += [
            wire.irecv_probed(probes[peer][0], indices),
            wire.irecv_probed(probes[peer][1], values),
        ]
    own_indices, own_values = block(rank)
    own_indices[:] = outgoing[rank][0]
    own_values[:] = encoded[id(outgoing[rank][1])]
    yield requests
    all_values, counts[:, 1] = wire.codec.decode_blocks(all_values, counts[:, 1], like.values.dtype)
    coded = _is_bitmap(counts[:, 0], counts[:, 1])
    if not coded.any():
        return all_indices, all_values, counts
    # some blocks came as bitmaps: their indices, in place of the bitmaps
    sizes = np.where(coded, counts[:, 1], counts[:, 0])
    indices, at = np.empty(int(sizes.sum()), all_indices.dtype), displacements(sizes)
    for owner in range(nprocs):
        out = indices[at[owner] : at[owner] + sizes[owner]]
        _indices(block(owner)[0], counts[owner, 1], lows[owner], out)
    counts[:, 0] = sizes
    return indices, all_values, counts


def split_allgather(wire, vec, dynamic=False):
    """SSAR_Split_allgather, or DSAR_Split_allgather when ``dynamic``.

    The index space splits into P ranges; a sparse reduce-scatter sends each range to its
    owner, which merges what it gets; an allgather then gives everyone every reduced range.
    With ``dynamic``, a range denser than delta travels as a dense block. Both phases are
    direct messages between every pair of ranks, all in flight at once.
    """
    nprocs, rank, size = wire.size, wire.rank, vec.size
    bounds = split_bounds(size, nprocs)
    cuts = np.searchsorted(vec.indices, bounds)
    slices = [
        (vec.indices[cuts[p] : cuts[p + 1]], vec.values[cuts[p] : cuts[p + 1]])
        for p in range(nprocs)
    ]
    lo, hi = bounds[rank], bounds[rank + 1]
    ranges = list(zip(bounds[:-1], bounds[1:], strict=True))
    runs_indices, runs_values, counts = yield from _swap_with_all(
        wire, slices, ranges, [lo] * nprocs, vec, _RANGES
    )
    indices, values = _reduce_range(runs_indices, runs_values, counts[:, 0], lo, hi, dynamic)
    if indices is None:
        indices = runs_indices[:0]
    all_indices, all_values, counts = yield from _swap_with_all(
        wire, [(indices, values)] * nprocs, [(lo, hi)] * nprocs, bounds[:-1], vec, _REDUCED
    )
    dense_blocks = counts[:, 0] != counts[:, 1]
    if not dense_blocks.any():
        # the ranges are disjoint and in order: the concatenation is sorted
        return SparseVector(all_indices, all_values, size, check=False)
    result = np.zeros(size, vec.values.dtype)
    index_at = displacements(counts[:, 0])
    value_at = displacements(counts[:, 1])
    for owner in range(nprocs):
        n_values = counts[owner, 1]
        got = all_values[value_at[owner] : value_at[owner] + n_values]
        if dense_blocks[owner]:
            result[bounds[owner] : bounds[owner + 1]] = got
        else:
            result[all_indices[index_at[owner] : index_at[owner] + n_values]] = got
    return result


def dense(wire, vec, out=None):
    """MPI ``Allreduce`` of the dense vector (the baseline), into ``out`` if given (which
    may be ``vec`` itself: in place)."""
    array = vec.to_dense() if isinstance(vec, SparseVector) else vec
    result = np.empty_like(array) if out is None else out
    yield wire.allreduce(MPI.IN_PLACE if result is array else array, result, MPI.SUM)
    return result


def dynamic_split_allgather(wire, vec):
    return (yield from split_allgather(wire, vec, dynamic=True))


BY_NAME = dict(
    zip(
        ALGORITHMS,
        (recursive_double, split_allgather, dynamic_split_allgather, dense),
        strict=True,
    )
)
"""The generator of each algorithm of :data:`cost_model.ALGORITHMS`."""
