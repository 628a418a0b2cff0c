"""QSGD quantization against its definition: unbiased, bounded variance, packed bits."""

import numpy as np
import pytest

from collectives import dequantize, quantize
from collectives._quantize import levels


def bucket_norms(values, bucket_size):
    pad = -values.size % bucket_size
    padded = np.concatenate([np.abs(values), np.zeros(pad, values.dtype)])
    return padded.reshape(-1, bucket_size).max(axis=1).repeat(bucket_size)[: values.size]


def rounding_variance(values, bits, bucket_size):
    """Each entry's variance: a step of ``norm / s``, taken with probability ``p``."""
    step = bucket_norms(values, bucket_size) / levels(bits)
    scaled = np.divide(np.abs(values), step, out=np.zeros_like(values), where=step > 0)
    p = scaled - np.floor(scaled)
    return step**2 * p * (1 - p)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mean_of_many_quantizations_is_the_input(bits, dtype):
    values = np.random.default_rng(3).standard_normal(700).astype(dtype)
    values[:5] = [0.0, 1e-30, -2.5, 7.0, -7.0]
    draws = 3000
    rng = np.random.default_rng(11)
    total = np.zeros(values.size)
    for _ in range(draws):
        total += dequantize(quantize(values, bits, bucket_size=128, random_state=rng))
    mean = total / draws
    standard_error = np.sqrt(rounding_variance(values.astype(np.float64), bits, 128) / draws)
    # an entry on a level (or within rounding of one) is not rounded at all
    exact = standard_error <= 1e-5 * np.abs(values) / np.sqrt(draws)
    assert np.all(np.abs(mean[exact] - values[exact]) <= 1e-6 * np.abs(values[exact]))
    z = (mean[~exact] - values[~exact]) / standard_error[~exact]
    # independent entries: 0.27% of them fall beyond 3 standard errors by chance
    assert np.mean(np.abs(z) > 3) <= 0.01, f"{np.sum(np.abs(z) > 3)} beyond 3 standard errors"
    assert np.all(np.abs(z) <= 5)
    assert np.mean(z) == pytest.approx(0.0, abs=3 / np.sqrt(z.size))
    assert np.mean(z**2) == pytest.approx(1.0, abs=0.15)  # the variance is the formula's


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_variance_within_the_qsgd_bound(bits):
    # QSGD's bound for one bucket of d entries: E|Q(v) - v|^2 <= min(d / s^2, sqrt(d) / s) |v|^2
    d = 512
    rng = np.random.default_rng(5)
    for values in (rng.standard_normal(d), rng.standard_exponential(d) ** 4, np.ones(d)):
        errors = [
            np.sum((dequantize(quantize(values, bits, random_state=rng)) - values) ** 2)
            for _ in range(400)
        ]
        s = levels(bits)
        bound = min(d / s**2, np.sqrt(d) / s) * np.sum(values**2)
        assert np.mean(errors) <= bound
        assert np.mean(errors) == pytest.approx(
            rounding_variance(values, bits, d).sum(), rel=0.1, abs=1e-12
        )


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_codes_are_packed_bits_of_sign_and_level(bits):
    values = np.array([1.0, -1.0, 0.0, 0.5, -0.25, 1.0, 0.0, -1.0])
    q = quantize(values, bits, bucket_size=4, random_state=0)
    assert q.codes.dtype == np.uint8 and q.codes.size == values.size * bits // 8
    np.testing.assert_array_equal(q.norms, [1.0, 1.0])
    per_byte = 8 // bits
    codes = (q.codes[:, None] >> (np.arange(per_byte) * bits)) & (2**bits - 1)
    codes = codes.ravel()
    s = levels(bits)
    level, negative = codes & (2 ** (bits - 1) - 1), codes >> (bits - 1)
    np.testing.assert_array_equal(negative[[1, 4, 7]], 1)
    np.testing.assert_array_equal(level[[0, 1, 5, 7]], s)
    np.testing.assert_array_equal(level[[2, 6]], 0)
    np.testing.assert_array_equal(
        dequantize(q), np.where(negative == 1, -1.0, 1.0) * level / s * np.repeat(q.norms, 4)
    )


def test_same_seed_same_codes_and_dtype_kept():
    values = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    a, b = (quantize(values, 4, random_state=7) for _ in range(2))
    np.testing.assert_array_equal(a.codes, b.codes)
    assert dequantize(a).dtype == np.float32 and a.norms.dtype == np.float32
    assert a.nbytes == 500 + 2 * 4  # 4 bits a value, a float32 norm per 512 values
    assert not np.array_equal(a.codes, quantize(values, 4, random_state=8).codes)


def test_empty_and_ragged_last_bucket():
    assert dequantize(quantize(np.empty(0), 2, random_state=0)).size == 0
    values = np.arange(1, 6, dtype=np.float64)
    q = quantize(values, 8, bucket_size=2, random_state=0)
    assert q.norms.tolist() == [2.0, 4.0, 5.0] and q.codes.size == 5
    assert np.abs(dequantize(q) - values).max() <= 5.0 / levels(8)


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"bits": 3}, ValueError, "bits must be one of \\[2, 4, 8\\], got 3"),
        ({"bucket_size": 0}, ValueError, "bucket_size must be at least 1, got 0"),
        ({"bucket_size": 2.5}, TypeError, "bucket_size must be an integer, got float"),
    ],
)
def test_bad_options(kwargs, error, fragment):
    kwargs = {"bits": 4, "random_state": 0, **kwargs}
    with pytest.raises(error, match=fragment):
        quantize(np.ones(3), **kwargs)


def test_bad_values():
    with pytest.raises(TypeError, match="values must be float32 or float64, got dtype int64"):
        quantize(np.arange(3), 4, random_state=0)
