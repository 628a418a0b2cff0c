"""Switch points of the sparse collectives.

They are read at every call, so tests and benchmarks may assign to them (on every rank of
the communicator alike) to make small vectors take the paths of large ones.
"""

DELTA_SCALE = 1.0
"""A reduced index range of ``n`` entries is sent dense once its nonzeros exceed
``DELTA_SCALE * delta``, where ``delta = n * itemsize(value) / (itemsize(index) +
itemsize(value))`` is the count at which the sparse form takes as many bytes as the dense."""

ACCUMULATE_FRACTION = 0.125
"""When the entries a rank receives for its index range exceed this fraction of the range's
length, it sums them into a dense buffer instead of merging them as sorted lists."""


def delta(n, value_itemsize, index_itemsize):
    """The nonzero count past which ``n`` entries are cheaper to send dense."""
    return DELTA_SCALE * n * value_itemsize / (index_itemsize + value_itemsize)
