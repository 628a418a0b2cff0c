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
"""The bit widths :func:`quantize` accepts."""

BUCKET_SIZE = 512
"""Values per norm, by default."""


@dataclass(frozen=True)
class Quantized:
    """Quantized values: ``codes`` (``bits`` bits a value, packed), one norm per bucket."""

    codes: np.ndarray  # uint8
    norms: np.ndarray  # the values' dtype
    size: int
    bits: int
    bucket_size: int

    @property
    def nbytes(self):
        """The bytes of codes and norms together."""
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

    ``random_state`` (a seed or a ``numpy.random.Generator``) draws the rounding; the same
    seed gives the same codes. :func:`dequantize` gives back values whose expectation is
    ``values``.
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
    """The values that ``quantized`` stands for, in the dtype of its norms."""
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
