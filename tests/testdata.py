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


def url_like(rows, n_features, classes=2):
    """Url-like rows (:func:`sparcml_apps.datasets.make_url_like`, seed 0); with more than
    two ``classes``, labels drawn at random from ``range(classes)``."""
    import numpy as np

    from sparcml_apps.datasets import make_url_like

    X, y = make_url_like(rows, n_features, random_state=0)
    if classes > 2:
        y = np.random.default_rng(0).integers(classes, size=rows).astype(np.float64)
    return X, y
