"""Where the small real LIBSVM files (a9a, a9a.t) for the tests are, if anywhere."""

import os
from pathlib import Path

import pytest

_CANDIDATES = [
    os.environ.get("SPARCML_TEST_DATA"),
    Path(__file__).resolve().parents[2] / "shared" / "data" / "libsvm",  # beside the checkout
    "/work/shared/data/libsvm",
]
LIBSVM = next(
    (Path(c) for c in _CANDIDATES if c and (Path(c) / "a9a").is_file()),
    Path(__file__).resolve().parents[2] / "shared" / "data" / "libsvm",
)
needs_a9a = pytest.mark.skipif(
    not (LIBSVM / "a9a").is_file(),
    reason=f"no LIBSVM test files at {LIBSVM} (set SPARCML_TEST_DATA to their folder)",
)
