"""QSGD stochastic quantization of values, packed into bytes.

Values are cut into buckets of ``bucket_size``; each bucket keeps one norm, its largest
magnitude (the scaling QSGD uses in practice; its variance bound holds for it too). With
``s = 2**(bits - 1) - 1`` levels, a value ``v`` of a bucket of norm ``m`` becomes
``sign(v) * m * l / s``, where ``l`` is ``|v| s / m`` rounded down or up at random with the
probabilities that make the expectation ``v``. A value takes ``bits`` bits: the sign, then
``l``; ``8 // bits`` of them share a byte, the first in the low bits.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit

from ._vector import check_values

BITS = (2, 4, 8)
"""The bit widths :func:`quantize` accepts (and ``quantization_bits`` of the collectives)."""

BUCKET_SIZE = 512
"""Values per norm, by default."""


@dataclass(frozen=True)
class Quantized:
    """Quantized values: ``codes`` (``bits`` bits a value, packed), one norm per bucket.

    What :func:`quantize` returns and :func:`dequantize` takes. Value ``i`` is bucket
    ``i // bucket_size``'s; its code holds the sign in the high bit and the level in the
    others, ``8 // bits`` codes to a byte, the first in the low bits.

    Parameters
    ----------
    codes : ndarray of uint8
        The packed codes, ``ceil(size * bits / 8)`` bytes.
    norms : ndarray of float32 or float64
        The largest magnitude of each bucket, ``ceil(size / bucket_size)`` of them, in the
        dtype of the values.
    size : int
        The number of values.
    bits : int
        The bits of each code: 2, 4 or 8.
    bucket_size : int
        The values per norm.

    See Also
    --------
    quantize : Make one from values.
    dequantize : The values it stands for.

    Examples
    --------
    >>> import numpy as np
    >>> from collectives import quantize
    >>> q = quantize(np.array([7.0, -3.0, 0.0, 1.0], np.float32), 4, random_state=0)
    >>> q.size, q.bits, q.bucket_size
    (4, 4, 512)
    >>> q.codes.tolist()  # 7 and 8 | 3 in the first byte, 0 and 1 in the second
    [183, 16]
    >>> q.norms.tolist()
    [7.0]
    """

    codes: np.ndarray  # uint8
    norms: np.ndarray  # the values' dtype
    size: int
    bits: int
    bucket_size: int

    @property
    def nbytes(self):
        """The bytes of codes and norms together.

        Examples
        --------
        >>> import numpy as np
        >>> from collectives import quantize
        >>> values = np.ones(1000, np.float32)
        >>> quantize(values, 8, random_state=0).nbytes  # 1000 codes, 2 float32 norms
        1008
        """
        return self.codes.nbytes + self.norms.nbytes


def levels(bits):
    """The number ``s`` of magnitude levels above zero of ``bits``-bit codes."""
    return 2 ** (bits - 1) - 1


def _check_options(bits, bucket_size):
    if bits not in BITS:
        raise ValueError(f"bits must be one of {list(BITS)}, got {bits!r}")
    if isinstance(bucket_size, bool) or not isinstance(bucket_size, int | np.integer):
        raise TypeError(f"bucket_size must be an integer, got {type(bucket_size).__name__}")
    if bucket_size < 1:
        raise ValueError(f"bucket_size must be at least 1, got {bucket_size}")


def quantize(values, bits, *, bucket_size=BUCKET_SIZE, random_state):
    """Quantize the 1-D float ``values`` to ``bits`` (2, 4 or 8) bits each, unbiased.

    QSGD stochastic quantization: each bucket of ``bucket_size`` values keeps its largest
    magnitude ``m`` as its norm, and a value ``v`` becomes ``sign(v) * m * l / s`` with
    ``s = 2**(bits - 1) - 1`` levels, where ``l`` is ``|v| s / m`` rounded down or up at
    random with the probabilities that make the expectation ``v``; zero stays zero.

    Parameters
    ----------
    values : ndarray of float32 or float64
        The values, 1-D (a list becomes float64).
    bits : {2, 4, 8}
        The bits of each code (:data:`collectives.BITS`).
    bucket_size : int, default 512
        The values per norm.
    random_state : int, sequence of int, numpy.random.Generator or None
        Draws the rounding, as ``numpy.random.default_rng`` takes it: the same seed gives
        the same codes; a Generator is advanced. Required, so that no call is random by
        accident (None draws fresh entropy).

    Returns
    -------
    Quantized
        The codes, ``ceil(values.size * bits / 8)`` bytes, and one norm per bucket in the
        dtype of ``values``.

    Raises
    ------
    TypeError
        If ``values`` is not float32 or float64, or ``bucket_size`` is not an integer.
    ValueError
        If ``values`` is not 1-D, ``bits`` is not 2, 4 or 8, or ``bucket_size`` is below 1.

    See Also
    --------
    dequantize : The values that the codes stand for.
    allreduce : Sums with ``quantization_bits`` send values quantized.

    Examples
    --------
    Values on the levels come back as they were (here with 4 bits, ``s = 7``, norm 7.0):

    >>> import numpy as np
    >>> from collectives import dequantize, quantize
    >>> q = quantize(np.array([7.0, -3.0, 0.0, 1.0], np.float32), 4, random_state=0)
    >>> dequantize(q).tolist()
    [7.0, -3.0, 0.0, 1.0]

    Others round to a level at random, unbiased: with 2 bits (``s = 1``) and norm 1.0,
    each 0.3 becomes 0.0 or 1.0, 1.0 three times in ten on average:

    >>> values = np.full(10_000, 0.3, np.float32)
    >>> values[0] = 1.0
    >>> q = quantize(values, 2, bucket_size=values.size, random_state=0)
    >>> q.nbytes  # 2500 bytes of codes, one float32 norm
    2504
    >>> sorted(set(dequantize(q).tolist()))
    [0.0, 1.0]
    >>> bool(abs(dequantize(q)[1:].mean() - 0.3) < 0.02)
    True
    """
    values = check_values(values)
    _check_options(bits, bucket_size)
    uniforms = np.random.default_rng(random_state).random(values.size, dtype=np.float32)
    buckets = -(-values.size // bucket_size)
    codes = np.zeros(-(-values.size * bits // 8), np.uint8)
    norms = np.empty(buckets, values.dtype)
    _quantize(values, bits, bucket_size, uniforms, norms, codes)
    return Quantized(codes, norms, values.size, bits, int(bucket_size))


def dequantize(quantized):
    """The values that ``quantized`` stands for, in the dtype of its norms.

    Parameters
    ----------
    quantized : Quantized
        Codes and norms, as :func:`quantize` made them.

    Returns
    -------
    ndarray of float32 or float64
        ``quantized.size`` values, each ``sign * norm * level / s`` of its code and bucket,
        with ``s = 2**(bits - 1) - 1``; their expectation over the rounding is the values
        that were quantized.

    See Also
    --------
    quantize : The codes of values.

    Examples
    --------
    >>> import numpy as np
    >>> from collectives import dequantize, quantize
    >>> values = np.array([0.5, -1.0, 0.25, 0.0])
    >>> restored = dequantize(quantize(values, 8, random_state=0))
    >>> restored.dtype.name
    'float64'
    >>> bool(np.abs(restored - values).max() <= 1.0 / 127)  # within a level (norm / s)
    True
    """
    out = np.empty(quantized.size, quantized.norms.dtype)
    _dequantize(quantized.codes, quantized.norms, quantized.bits, quantized.bucket_size, out)
    return out


@njit(cache=True, nogil=True)
def _quantize(values, bits, bucket_size, uniforms, norms, codes):
    s = (1 << (bits - 1)) - 1
    per_byte = 8 // bits
    for b in range(norms.size):
        lo = b * bucket_size
        hi = min(lo + bucket_size, values.size)
        norm = values.dtype.type(0)
        for i in range(lo, hi):
            norm = max(norm, abs(values[i]))
        norms[b] = norm
        if norm == 0:
            continue
        scale = s / np.float64(norm)
        for i in range(lo, hi):
            x = abs(values[i]) * scale
            level = min(int(x), s)
            if uniforms[i] < x - level:
                level += 1
            code = level | ((1 << (bits - 1)) if values[i] < 0 else 0)
            codes[i // per_byte] |= np.uint8(code << ((i % per_byte) * bits))


@njit(cache=True, nogil=True)
def _dequantize(codes, norms, bits, bucket_size, out):
    s = (1 << (bits - 1)) - 1
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    sign = 1 << (bits - 1)
    for b in range(norms.size):
        lo = b * bucket_size
        hi = min(lo + bucket_size, out.size)
        step = norms[b] / out.dtype.type(s)
        for i in range(lo, hi):
            code = (codes[i // per_byte] >> ((i % per_byte) * bits)) & mask
            magnitude = step * out.dtype.type(code & (sign - 1))
            out[i] = -magnitude if code & sign else magnitude
