"""Numbers in LIBSVM text become exactly what Python's ``float()`` makes of them."""

import io
import struct
from decimal import Decimal, getcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from sparcml_apps.datasets._svmlight import read_all
from sparcml_apps.datasets._svmlight_kernels import EXACT, SLOW, number


@njit
def _scan(text, starts, stops):
    values = np.empty(starts.size)
    ends = np.empty(starts.size, np.int64)
    codes = np.empty(starts.size, np.int64)
    for t in range(starts.size):
        values[t], ends[t], codes[t] = number(text, starts[t], stops[t])
    return values, ends, codes


def kernel(tokens):
    """The kernel's (values, codes) for each token alone, each followed by a space."""
    text = np.frombuffer(b"".join(t + b" " for t in tokens), np.uint8)
    stops = np.cumsum([len(t) + 1 for t in tokens])
    starts = stops - 1 - [len(t) for t in tokens]
    values, ends, codes = _scan(text, starts, stops)
    valid = (codes == EXACT) | (codes == SLOW)
    np.testing.assert_array_equal(ends[valid], stops[valid] - 1)  # each stops at its space
    return values, codes


def parsed(tokens):
    """The values of ``tokens`` read by the parser, ten to a line, then as labels."""
    lines = [
        b"1 " + b" ".join(b"%d:%s" % (k + 1, t) for k, t in enumerate(tokens[i : i + 10]))
        for i in range(0, len(tokens), 10)
    ]
    row_nnz, _, _, values, _ = read_all(io.BytesIO(b"\n".join(lines)), "numbers.svm")
    _, labels, _, _, _ = read_all(io.BytesIO(b" 1:1\n".join(tokens) + b" 1:1\n"), "labels.svm")
    return values, labels


def bits(values):
    return np.asarray(values, np.float64).view(np.uint64)


def assert_equal_to_float(tokens):
    expected = bits([float(t) for t in tokens])
    values, labels = parsed(tokens)
    np.testing.assert_array_equal(bits(values), expected)
    np.testing.assert_array_equal(bits(labels), expected)
    values, codes = kernel(tokens)
    converted = codes == EXACT
    np.testing.assert_array_equal(bits(values)[converted], expected[converted])
    assert np.all((codes == EXACT) | (codes == SLOW))
    return codes


EDGES = [
    # zeros, signs, forms
    "0", "-0", "+0", "0.0", "-0.0e5", "0e999999999", "-.0", "+1", "-1", "+.5", "5.", ".5e-3",
    "1E5", "1e+5", "1e-5", "007", "-00000000000000000000000000001.5", "000.000100",
    # subnormals and the ends of the range
    "4.9406564584124654e-324", "5e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
    "1e-324", "-1e-400", "2.2250738585072011e-308", "2.2250738585072014e-308",
    "2.2250738585072012e-308", "4.4501477170144023e-308", "1.7976931348623157e308",
    "1.7976931348623158e308", "1.7976931348623159e308", "-1.7976931348623159e308", "1e308",
    "1e309", "1e400", "-1e400", "0.1e310", "1000e-1000", "1e-99999", "1e999999999999999999999",
    # 2**53 and around, ties to even, 20+ digits
    "9007199254740991", "9007199254740992", "9007199254740993", "9007199254740995",
    "9007199254740993.0000000000000000001", "18446744073709551615", "18446744073709551616",
    "9999999999999999999", "10000000000000000000", "123456789012345678901234567890",
    "1.00000000000000011102230246251565404236316680908203125",
    "1.00000000000000011102230246251565404236316680908203124",
    "1.00000000000000011102230246251565404236316680908203126",
    "0.1", "0.2", "0.3", "1e23", "8.98846567431158e307", "7.2057594037927933e16",
    "3.14159265358979323846264338327950288419716939937510582097494459",
    "0." + "0" * 400 + "1e400",
    # inf and nan, which float() accepts
    "inf", "-inf", "+Infinity", "nan", "-NaN",
]  # fmt: skip


def test_edge_cases_equal_float():
    tokens = [t.encode() for t in EDGES]
    assert_equal_to_float(tokens)
    values, codes = kernel(tokens)
    assert codes[EDGES.index("1.7976931348623157e308")] == EXACT
    assert (
        codes[EDGES.index("3.14159265358979323846264338327950288419716939937510582097494459")] == 0
    )
    assert codes[EDGES.index("inf")] == SLOW


def test_full_precision_values_are_converted_in_the_kernel():
    # what dump_svmlight_file ("%.16g"), repr and "%.17g" write: none left to Python
    rng = np.random.default_rng(0)
    numbers = rng.standard_normal(30_000) * 10.0 ** rng.integers(-300, 300, 30_000)
    tokens = [f.encode() for x in numbers.tolist() for f in (f"{x:.16g}", repr(x), f"{x:.17g}")]
    codes = assert_equal_to_float(tokens)
    assert np.all(codes == EXACT)


def test_rounding_ties_equal_float():
    # halfway between neighbouring doubles, written exactly, cut or nudged
    getcontext().prec = 800
    rng = np.random.default_rng(1)
    tokens = []
    for word in rng.integers(1, 0x7FEFFFFFFFFFFFFF, 2000, dtype=np.int64):
        x = struct.unpack("<d", struct.pack("<q", int(word)))[0]
        middle = (Decimal(x) + Decimal(float(np.nextafter(x, np.inf)))) / 2
        tokens += [format(middle, "e").encode()]
        tokens += [format(middle, f".{digits}e").encode() for digits in (15, 16, 17, 18, 19, 24)]
    assert_equal_to_float(tokens)


def decimal_texts():
    digits = st.text("0123456789", min_size=0, max_size=30)
    exponent = st.one_of(st.just(""), st.integers(-400, 400).map(lambda e: f"e{e:+d}"))
    return (
        st.tuples(st.sampled_from(["", "-", "+"]), digits, st.booleans(), digits, exponent)
        .filter(lambda p: p[1] or (p[2] and p[3]))
        .map(lambda p: f"{p[0]}{p[1]}{'.' if p[2] else ''}{p[3] if p[2] else ''}{p[4]}")
    )


def float_texts():
    fmt = st.sampled_from(["%r", "%.1g", "%.5f", "%.15g", "%.16g", "%.17g", "%.20e", "%.25g"])
    return st.tuples(fmt, st.floats(allow_nan=False, allow_infinity=False)).map(
        lambda p: repr(p[1]) if p[0] == "%r" else p[0] % p[1]
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(decimal_texts(), float_texts()), min_size=1, max_size=40))
def test_random_numbers_equal_float(texts):
    assert_equal_to_float([t.encode() for t in texts])


@pytest.mark.parametrize("token", [b"1.5.5", b"1e", b"1e+", b"--1", b".", b"1_0", b"0x10"])
def test_malformed_numbers_are_errors(token):
    _, codes = kernel([token])
    assert codes[0] not in (EXACT, SLOW)
